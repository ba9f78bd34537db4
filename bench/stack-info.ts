// The local stack as the benchmark sees it: brought up if missing, the pids of its Redis nodes and MariaDB
// (for CPU accounting), a fresh benchmark database, and clean-up of a run's Redis keys.
// Client libraries are imported where used: the orchestrator starts faster, and module loading is CPU the
// servers' start-up competes for.
import { readdirSync, readFileSync } from 'node:fs';
import { REDIS_PORTS, redisCli, stackUp } from '../deploy/local/stack.js';

const mysqlConnect = async (url: string) => (await import('mysql2/promise')).createConnection(url);

export interface StackPids {
  redis: number[];
  mysql: number[];
}

export async function ensureStack(): Promise<void> {
  await stackUp();
}

export async function stackPids(mysqlUrl: string): Promise<StackPids> {
  const redis = REDIS_PORTS.map((p) => Number(/process_id:(\d+)/.exec(redisCli(p, 'info', 'server'))?.[1] ?? 0)).filter((p) => p > 0);
  const mysql: number[] = [];
  const conn = await mysqlConnect(serverUrl(mysqlUrl));
  try {
    const [rows] = await conn.query('select @@pid_file as f');
    const file = String((rows as { f: string }[])[0]?.f ?? '');
    const pid = Number(readFileSync(file, 'utf8').trim());
    if (pid > 0) mysql.push(pid);
  } catch {
    // The pid file is not readable (the Debian package's is the mysql user's alone): found by name below.
  } finally {
    await conn.end();
  }
  if (mysql.length === 0) mysql.push(...processesNamed(['mariadbd', 'mysqld']));
  return { redis, mysql };
}

/** Pids of the processes whose command name is one of `names` (/proc/<pid>/comm is readable by anyone). Empty
 * when none is found: MariaDB CPU is then reported as 0. */
function processesNamed(names: string[]): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (names.includes(readFileSync(`/proc/${d}/comm`, 'utf8').trim())) out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function serverUrl(url: string): string {
  const u = new URL(url);
  u.pathname = '/';
  return u.toString();
}

/** Drops and re-creates the benchmark's own database (never the service's or the tests'). The first service
 * server to start runs the migrations (the others start after it, so they do not race to create tables). */
export async function recreateDatabase(url: string): Promise<void> {
  const db = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_]*bench[A-Za-z0-9_]*$/.test(db))
    throw new Error(`refusing to recreate ${JSON.stringify(db)}: the benchmark database name must contain "bench"`);
  const conn = await mysqlConnect(serverUrl(url));
  try {
    await conn.query(`drop database if exists \`${db}\``);
    await conn.query(`create database \`${db}\` character set utf8mb4`);
  } finally {
    await conn.end();
  }
}

/** Unlinks every key under `<ns>:` on every master (a run's shards, request records, outboxes, baseline keys). */
export async function deleteNamespace(ns: string): Promise<number> {
  const { Cluster } = await import('ioredis');
  const cluster = new Cluster(
    REDIS_PORTS.slice(0, 3).map((port) => ({ host: '127.0.0.1', port })),
    { scaleReads: 'master' },
  );
  let deleted = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      cluster.once('ready', () => resolve());
      cluster.once('error', reject);
    });
    for (const node of cluster.nodes('master')) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${ns}:*`, 'COUNT', 2000);
        cursor = next;
        if (keys.length > 0) {
          const p = node.pipeline();
          for (const k of keys) p.unlink(k);
          await p.exec();
          deleted += keys.length;
        }
      } while (cursor !== '0');
    }
  } finally {
    cluster.disconnect();
  }
  return deleted;
}

/** Removes the JetStream stream a settlement run of namespace `ns` created. */
export async function deleteSettlementStream(ns: string): Promise<void> {
  const { connect } = await import('nats');
  const { settlementNames } = await import('../src/settlement/jetstream.js');
  const nc = await connect({ servers: 'nats://127.0.0.1:4222' });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(settlementNames(ns).stream);
  } finally {
    await nc.close();
  }
}
