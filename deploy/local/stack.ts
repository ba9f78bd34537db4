// The local stack: Redis Cluster (3 masters + 3 replicas on 127.0.0.1:7001-7006), NATS JetStream and
// MariaDB, on loopback only. `up` reuses what already answers and starts only what is missing, each from its
// own data under .data/, which it never deletes: Redis nodes keep an AOF (fsync every second) and nodes.conf,
// NATS its JetStream store, MariaDB its datadir. Only `reset` deletes, and only what the stack owns. A process
// is signalled only when its pidfile names the server really listening on that port.
//
//   npm run stack -- setup | up | down | status | reset
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ownedServerPid, signalOwnedServer } from './owned-process.js';
import { announceReset, clusterHealthy, type RedisLayout, redisDown, redisResetPlan, redisUp } from './redis-cluster.js';
import { installPrograms, MARIADB_PROGRAMS, STACK_PROGRAMS, TEST_PROGRAMS, which } from './system-packages.js';
import { portOpen, waitFor } from './wait.js';

export {
  clusterHealthy,
  createRedisCluster,
  type RedisLayout,
  redisCli,
  redisDown,
  redisReset,
  redisUp,
  startRedisNode,
} from './redis-cluster.js';
export { portOpen, waitFor } from './wait.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DATA = join(ROOT, '.data');
export const REDIS_PORTS = [7001, 7002, 7003, 7004, 7005, 7006];
/** The stack's own cluster: ports 7001-7006, each node's data in .data/redis/<port>. */
export const LOCAL_REDIS: RedisLayout = { ports: REDIS_PORTS, dirOf: (port) => join(DATA, 'redis', String(port)) };
const NATS_PORT = 4222;
const MYSQL_PORT = 3306;
const NATS_DIR = join(DATA, 'nats');
const MYSQL_DIR = join(DATA, 'mysql');

const log = (msg: string) => process.stderr.write(`[stack] ${msg}\n`);

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The live pid in a pidfile, unverified: for test fixtures that signal their own nodes by pidfile. */
export function readPid(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(pid) && pid > 0 && pidAlive(pid) ? pid : undefined;
}

// ---------------------------------------------------------------- NATS

async function natsUp(): Promise<void> {
  if (await portOpen(NATS_PORT)) {
    log(`nats: 127.0.0.1:${NATS_PORT} answers (reused)`);
    return;
  }
  mkdirSync(NATS_DIR, { recursive: true });
  const out = openSync(join(NATS_DIR, 'nats.log'), 'a');
  const child = spawn(
    'nats-server',
    ['-a', '127.0.0.1', '-p', String(NATS_PORT), '-js', '-sd', NATS_DIR, '-P', join(NATS_DIR, 'nats.pid')],
    {
      detached: true,
      stdio: ['ignore', out, out],
    },
  );
  child.unref();
  await waitFor('nats-server', () => portOpen(NATS_PORT), 10_000);
  log(`nats: started on 127.0.0.1:${NATS_PORT} with JetStream (store in .data/nats)`);
}

// ---------------------------------------------------------------- MariaDB

async function mysqlUp(): Promise<void> {
  if (await portOpen(MYSQL_PORT)) {
    log(`mysql: 127.0.0.1:${MYSQL_PORT} answers (reused)`);
    return;
  }
  const datadir = join(MYSQL_DIR, 'data');
  const cnf = join(MYSQL_DIR, 'my.cnf');
  mkdirSync(MYSQL_DIR, { recursive: true });
  writeFileSync(
    cnf,
    [
      '[mariadbd]',
      `datadir=${datadir}`,
      `socket=${join(MYSQL_DIR, 'mysqld.sock')}`,
      `pid-file=${join(MYSQL_DIR, 'mysqld.pid')}`,
      `log-error=${join(MYSQL_DIR, 'mysqld.err')}`,
      'bind-address=127.0.0.1',
      `port=${MYSQL_PORT}`,
      'skip-name-resolve',
      'innodb_flush_log_at_trx_commit=2',
      'max_connections=500',
      ...(process.getuid?.() === 0 ? ['user=root'] : []),
      '',
    ].join('\n'),
  );
  if (!existsSync(join(datadir, 'mysql'))) {
    const init = spawnSync('mariadb-install-db', [`--defaults-file=${cnf}`, '--auth-root-authentication-method=normal', '--skip-test-db'], {
      encoding: 'utf8',
    });
    if (init.status !== 0) throw new Error(`mariadb-install-db failed: ${init.stderr}`);
  }
  const child = spawn(which('mariadbd') ?? 'mariadbd', [`--defaults-file=${cnf}`], { detached: true, stdio: 'ignore' });
  child.unref();
  await waitFor('mariadbd', () => portOpen(MYSQL_PORT), 30_000);
  // A fresh datadir has root@localhost only; TCP connections with skip-name-resolve come from 127.0.0.1.
  spawnSync(
    'mariadb',
    [
      '-uroot',
      `--socket=${join(MYSQL_DIR, 'mysqld.sock')}`,
      '-e',
      "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;",
    ],
    { stdio: 'inherit' },
  );
  log(`mysql: started private mariadbd on 127.0.0.1:${MYSQL_PORT} (data in .data/mysql)`);
}

/** NATS and MariaDB as the stack runs them when nothing answers on their port. */
interface OwnServer {
  name: string;
  dir: string;
  pidFile: string;
  port: number;
  binary: string;
}

const OWN_SERVERS: OwnServer[] = [
  { name: 'nats', dir: NATS_DIR, pidFile: join(NATS_DIR, 'nats.pid'), port: NATS_PORT, binary: 'nats-server' },
  { name: 'mysql', dir: MYSQL_DIR, pidFile: join(MYSQL_DIR, 'mysqld.pid'), port: MYSQL_PORT, binary: 'mariadbd' },
];

const ownPid = (s: OwnServer) => ownedServerPid(s.pidFile, s.port, s.binary);

/** SIGTERMs our own server and waits for its port to close; a server we did not start is left alone. */
async function stopOwned(s: OwnServer): Promise<void> {
  if (signalOwnedServer(s.pidFile, s.port, s.binary, 'SIGTERM')) {
    await waitFor(`${s.name} to exit`, async () => !(await portOpen(s.port)), 30_000);
    log(`${s.name}: stopped (data kept in ${s.dir})`);
  } else if (await portOpen(s.port)) {
    log(`${s.name}: left running on ${s.port} (not started by this stack)`);
  }
}

/** Whether reset may delete the server's directory: nothing runs from it, or what runs is ours (stopped first).
 * A live pid in its pidfile that we cannot prove is ours keeps the directory. */
async function deletable(s: OwnServer): Promise<boolean> {
  if (!existsSync(s.dir)) return false;
  return ownPid(s) !== undefined || !(await portOpen(s.port)) || readPid(s.pidFile) === undefined;
}

// ---------------------------------------------------------------- entry points

/** Installs every Debian package the stack and the test suites use; `npm test` runs it before any suite. */
export async function stackSetup(): Promise<void> {
  const mariadb = (await portOpen(MYSQL_PORT)) ? [] : MARIADB_PROGRAMS;
  await installPrograms([...STACK_PROGRAMS, ...mariadb, ...TEST_PROGRAMS]);
}

export async function stackUp(): Promise<void> {
  const mariadb = (await portOpen(MYSQL_PORT)) ? [] : MARIADB_PROGRAMS;
  await installPrograms([...STACK_PROGRAMS, ...mariadb]);
  const redis = async () => {
    const r = await redisUp(LOCAL_REDIS);
    const what = {
      reused: 'up (reused)',
      restarted: `restarted ${r.started.join(', ')}; they rejoined`,
      created: 'created 3 masters + 3 replicas',
    };
    log(`redis cluster on 127.0.0.1:${REDIS_PORTS[0]}-${REDIS_PORTS.at(-1)}: ${what[r.action]}`);
  };
  await Promise.all([redis(), natsUp(), mysqlUp()]);
}

export async function stackDown(): Promise<void> {
  const { stopped, notOurs } = await redisDown(LOCAL_REDIS);
  if (stopped.length > 0) log(`redis: stopped ${stopped.join(', ')} (data kept in .data/redis)`);
  if (notOurs.length > 0) log(`redis: left running on ${notOurs.join(', ')} (not started by this stack)`);
  for (const s of OWN_SERVERS) await stopOwned(s);
}

/** Stops what the stack started and deletes its data, after naming every path. System services and their data
 * are never touched; a directory whose server this stack cannot prove it started is kept. */
export async function stackReset(): Promise<string[]> {
  const redis = await redisResetPlan(LOCAL_REDIS);
  const own: string[] = [];
  for (const s of OWN_SERVERS) if (await deletable(s)) own.push(s.dir);
  const deleted = [...redis.deleted, ...own];
  announceReset(deleted, redis.kept);
  await redisDown(LOCAL_REDIS);
  for (const s of OWN_SERVERS) await stopOwned(s);
  for (const dir of deleted) rmSync(dir, { recursive: true, force: true });
  return deleted;
}

export async function stackStatus(): Promise<Record<string, string>> {
  const redisOpen = await Promise.all(REDIS_PORTS.map((p) => portOpen(p)));
  return {
    redis: redisOpen.every(Boolean)
      ? clusterHealthy(REDIS_PORTS)
        ? 'cluster ok'
        : 'cluster not healthy'
      : `down on ${REDIS_PORTS.filter((_, i) => !redisOpen[i]).join(',')}`,
    nats: (await portOpen(NATS_PORT)) ? `up on ${NATS_PORT}${ownPid(OWN_SERVERS[0]!) ? ' (ours)' : ''}` : 'down',
    mysql: (await portOpen(MYSQL_PORT)) ? `up on ${MYSQL_PORT}${ownPid(OWN_SERVERS[1]!) ? ' (ours)' : ''}` : 'down',
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const cmd = process.argv[2] ?? 'status';
  try {
    if (cmd === 'setup') await stackSetup();
    else if (cmd === 'up') await stackUp();
    else if (cmd === 'down') await stackDown();
    else if (cmd === 'reset') {
      await stackReset();
      log('reset done: `npm run stack -- up` starts a new, empty stack');
    } else if (cmd === 'status') console.log(JSON.stringify(await stackStatus(), null, 2));
    else {
      console.error('usage: npm run stack -- setup|up|down|status|reset');
      process.exit(2);
    }
  } catch (err) {
    console.error(`[stack] ${(err as Error).message}`);
    process.exit(1);
  }
}
