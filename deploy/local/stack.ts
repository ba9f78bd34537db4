// The local stack: Redis Cluster (3 masters + 3 replicas on 127.0.0.1:7001-7006), NATS JetStream and
// MariaDB, brought up when missing, on loopback only. Idempotent: what already answers is reused; only
// processes this script started (pidfiles under .data/) are ever stopped.
//
//   npm run stack -- up | down | status
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DATA = join(ROOT, '.data');
export const REDIS_PORTS = [7001, 7002, 7003, 7004, 7005, 7006];
const NATS_PORT = 4222;
const MYSQL_PORT = 3306;

const log = (msg: string) => process.stderr.write(`[stack] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function portOpen(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<boolean> {
  return new Promise((resolveOpen) => {
    const socket = connect({ port, host });
    const done = (ok: boolean) => {
      socket.destroy();
      resolveOpen(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

function which(bin: string): string | undefined {
  for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    if (existsSync(join(dir, bin))) return join(dir, bin);
  }
  return undefined;
}

/** Installs Debian packages when running as root with apt; otherwise says what to run. */
function ensureBinaries(needed: Record<string, string>): void {
  const missing = Object.entries(needed).filter(([bin]) => !which(bin));
  if (missing.length === 0) return;
  const pkgs = [...new Set(missing.map(([, pkg]) => pkg))];
  const cmd = `apt-get install -y --no-install-recommends ${pkgs.join(' ')}`;
  if (process.getuid?.() !== 0 || !which('apt-get')) {
    throw new Error(`missing ${missing.map(([b]) => b).join(', ')}: run  sudo apt-get update && sudo ${cmd}`);
  }
  log(`installing ${pkgs.join(' ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
  if (update.status !== 0) throw new Error('apt-get update failed');
  const install = spawnSync('sh', ['-c', cmd], { stdio: 'inherit', env });
  if (install.status !== 0) throw new Error(`${cmd} failed`);
  // Debian starts the packaged services on install; they would take our ports.
  spawnSync('sh', ['-c', 'service redis-server stop; service nats-server stop'], { stdio: 'ignore' });
}

export function redisCli(port: number, ...args: string[]): string {
  const r = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 5000 });
  return (r.stdout ?? '').trim();
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function readPid(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(pid) && pid > 0 && pidAlive(pid) ? pid : undefined;
}

// ---------------------------------------------------------------- Redis Cluster

const redisDir = (port: number) => join(DATA, 'redis', String(port));

/** Every node reports cluster_state:ok and at least 3 masters + 3 replicas are up (fault tests reuse it). */
export function clusterHealthy(ports: number[] = REDIS_PORTS): boolean {
  for (const port of ports) {
    if (!redisCli(port, 'cluster', 'info').includes('cluster_state:ok')) return false;
  }
  const nodes = redisCli(ports[0]!, 'cluster', 'nodes').split('\n').filter(Boolean);
  const masters = nodes.filter((l) => l.includes('master') && !l.includes('fail'));
  const replicas = nodes.filter((l) => l.includes('slave') && !l.includes('fail'));
  return masters.length >= 3 && replicas.length >= 3;
}

/** Starts one cluster-enabled redis-server, daemonized, with its nodes.conf, pidfile and log in `dir`. */
export function startRedisNode(port: number, dir: string = redisDir(port)): void {
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--daemonize',
      'yes',
      '--dir',
      dir,
      '--pidfile',
      join(dir, 'redis.pid'),
      '--logfile',
      join(dir, 'redis.log'),
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      '2000',
      // A replica that loses its master takes over even if its data is slightly behind: availability first,
      // durability comes from the service's `replica` ack level (WAIT).
      '--cluster-replica-validity-factor',
      '0',
      '--repl-diskless-sync',
      'yes',
      '--repl-diskless-sync-delay',
      '0',
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory-policy',
      'noeviction',
    ],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) throw new Error(`redis-server on ${port} failed to start`);
}

async function redisUp(): Promise<void> {
  const answering = await Promise.all(REDIS_PORTS.map((p) => portOpen(p)));
  if (answering.every(Boolean) && clusterHealthy()) {
    log('redis cluster: up (reused)');
    return;
  }
  // Only nodes started by us (pidfile under .data) may be wiped; a foreign process on a port is an error.
  for (const [i, port] of REDIS_PORTS.entries()) {
    if (answering[i] && !readPid(join(redisDir(port), 'redis.pid'))) {
      throw new Error(`port ${port} is taken by a process this stack did not start; free it or set SHARDSTOCK_REDIS_NODES`);
    }
  }
  const formed = answering.every(Boolean) && redisCli(REDIS_PORTS[0]!, 'cluster', 'info').includes('cluster_known_nodes:6');
  if (formed) {
    // Ours and formed, still converging (e.g. a failover in progress): wait instead of wiping it.
    await waitFor('redis cluster to become healthy', async () => clusterHealthy(), 20_000);
    log('redis cluster: up (reused)');
    return;
  }
  await createRedisCluster(REDIS_PORTS, redisDir);
  log('redis cluster: started 3 masters + 3 replicas on 127.0.0.1:7001-7006');
}

/** Kills the nodes of `ports` that a pidfile in their dir says we started, wipes their dirs, starts them
 * afresh and forms a cluster with one replica per master. Also used by the fault tests on their own ports. */
export async function createRedisCluster(ports: number[], dirOf: (port: number) => string): Promise<void> {
  for (const port of ports) {
    const pid = readPid(join(dirOf(port), 'redis.pid'));
    if (pid) process.kill(pid, 'SIGKILL');
  }
  await waitFor('old redis nodes to exit', async () => (await Promise.all(ports.map((p) => portOpen(p)))).every((o) => !o), 10_000);
  for (const port of ports) {
    rmSync(dirOf(port), { recursive: true, force: true });
    startRedisNode(port, dirOf(port));
  }
  await waitFor('redis nodes', async () => (await Promise.all(ports.map((p) => portOpen(p)))).every(Boolean), 10_000);
  const create = spawnSync(
    'redis-cli',
    ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'],
    { encoding: 'utf8' },
  );
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
  await waitFor('redis cluster to become healthy', async () => clusterHealthy(ports), 30_000);
  // Replicas must have finished their first sync before WAIT can be acknowledged.
  await waitFor(
    'replicas to sync',
    async () =>
      ports.every((p) => {
        const info = redisCli(p, 'info', 'replication');
        return info.includes('role:master') || info.includes('master_link_status:up');
      }),
    20_000,
  );
}

function redisDown(): void {
  for (const port of REDIS_PORTS) {
    const pid = readPid(join(redisDir(port), 'redis.pid'));
    if (pid) process.kill(pid, 'SIGTERM');
  }
}

// ---------------------------------------------------------------- NATS

async function natsUp(): Promise<void> {
  if (await portOpen(NATS_PORT)) {
    log(`nats: 127.0.0.1:${NATS_PORT} answers (reused)`);
    return;
  }
  const dir = join(DATA, 'nats');
  mkdirSync(dir, { recursive: true });
  const out = openSync(join(dir, 'nats.log'), 'a');
  const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(NATS_PORT), '-js', '-sd', dir, '-P', join(dir, 'nats.pid')], {
    detached: true,
    stdio: ['ignore', out, out],
  });
  child.unref();
  await waitFor('nats-server', () => portOpen(NATS_PORT), 10_000);
  log(`nats: started on 127.0.0.1:${NATS_PORT} with JetStream`);
}

function natsDown(): void {
  const pid = readPid(join(DATA, 'nats', 'nats.pid'));
  if (pid) process.kill(pid, 'SIGTERM');
}

// ---------------------------------------------------------------- MariaDB

async function mysqlUp(): Promise<void> {
  if (await portOpen(MYSQL_PORT)) {
    log(`mysql: 127.0.0.1:${MYSQL_PORT} answers (reused)`);
    return;
  }
  const dir = join(DATA, 'mysql');
  const datadir = join(dir, 'data');
  const cnf = join(dir, 'my.cnf');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    cnf,
    [
      '[mariadbd]',
      `datadir=${datadir}`,
      `socket=${join(dir, 'mysqld.sock')}`,
      `pid-file=${join(dir, 'mysqld.pid')}`,
      `log-error=${join(dir, 'mysqld.err')}`,
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
  const sock = join(dir, 'mysqld.sock');
  spawnSync(
    'mariadb',
    [
      '-uroot',
      `--socket=${sock}`,
      '-e',
      "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;",
    ],
    { stdio: 'inherit' },
  );
  log(`mysql: started private mariadbd on 127.0.0.1:${MYSQL_PORT} (data in .data/mysql)`);
}

function mysqlDown(): void {
  const pid = readPid(join(DATA, 'mysql', 'mysqld.pid'));
  if (pid) process.kill(pid, 'SIGTERM');
}

// ---------------------------------------------------------------- entry points

export async function stackUp(): Promise<void> {
  const needed: Record<string, string> = { 'redis-server': 'redis-server', 'redis-cli': 'redis-tools' };
  if (!(await portOpen(NATS_PORT))) needed['nats-server'] = 'nats-server';
  if (!(await portOpen(MYSQL_PORT))) {
    needed['mariadbd'] = 'mariadb-server';
    needed['mariadb-install-db'] = 'mariadb-server';
    needed['mariadb'] = 'mariadb-client';
  }
  ensureBinaries(needed);
  await Promise.all([redisUp(), natsUp(), mysqlUp()]);
}

export function stackDown(): void {
  redisDown();
  natsDown();
  mysqlDown();
  log('stopped what this stack had started');
}

export async function stackStatus(): Promise<Record<string, string>> {
  const redisOpen = await Promise.all(REDIS_PORTS.map((p) => portOpen(p)));
  return {
    redis: redisOpen.every(Boolean)
      ? clusterHealthy()
        ? 'cluster ok'
        : 'cluster not healthy'
      : `down on ${REDIS_PORTS.filter((_, i) => !redisOpen[i]).join(',')}`,
    nats: (await portOpen(NATS_PORT)) ? `up on ${NATS_PORT}${readPid(join(DATA, 'nats', 'nats.pid')) ? ' (ours)' : ''}` : 'down',
    mysql: (await portOpen(MYSQL_PORT)) ? `up on ${MYSQL_PORT}${readPid(join(DATA, 'mysql', 'mysqld.pid')) ? ' (ours)' : ''}` : 'down',
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const cmd = process.argv[2] ?? 'status';
  try {
    if (cmd === 'up') await stackUp();
    else if (cmd === 'down') stackDown();
    else if (cmd === 'status') console.log(JSON.stringify(await stackStatus(), null, 2));
    else {
      console.error('usage: npm run stack -- up|down|status');
      process.exit(2);
    }
  } catch (err) {
    console.error(`[stack] ${(err as Error).message}`);
    process.exit(1);
  }
}
