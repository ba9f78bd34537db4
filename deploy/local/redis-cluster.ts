// The local Redis Cluster's nodes: each a daemonized redis-server with its own directory (nodes.conf, AOF,
// pidfile, log). `redisUp` never deletes anything: it starts the nodes that are missing, which rejoin from their
// nodes.conf with their AOF, and creates a cluster only when no node has ever been part of one. Deleting is
// `redisReset`'s job alone. The stack's cluster and the tests' private ones differ only in their layout.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ownedServerPid, signalOwnedServer } from './owned-process.js';
import { redisCli } from './redis-cli.js';
import { emptyMasterId, idsAt, rejoinEmptyNode, waitForTakeover } from './redis-rejoin.js';
import { portOpen, waitFor } from './wait.js';

export { redisCli } from './redis-cli.js';

export interface RedisLayout {
  /** Six ports: three masters, three replicas. */
  ports: number[];
  /** A node's own directory: nodes.conf, appendonlydir/, redis.pid, redis.log. */
  dirOf: (port: number) => string;
}

export interface RedisNodeOptions {
  /** `aof` (default): append-only file, fsync every second, so a restarted node comes back with its data.
   * `none`: nothing on disk but nodes.conf, for fault tests that want a node to come back empty. */
  persistence?: 'aof' | 'none';
}

export interface RedisUpResult {
  /** `reused`: healthy as found; `restarted`: the missing nodes were started and rejoined; `created`: a new cluster. */
  action: 'reused' | 'restarted' | 'created';
  /** The ports whose node this call started. */
  started: number[];
}

const log = (msg: string) => process.stderr.write(`[stack] ${msg}\n`);
const pidFile = (layout: RedisLayout, port: number) => join(layout.dirOf(port), 'redis.pid');
const allOpen = async (ports: number[]) => (await Promise.all(ports.map((p) => portOpen(p)))).every(Boolean);
const allClosed = async (ports: number[]) => (await Promise.all(ports.map((p) => portOpen(p)))).every((o) => !o);

/** The pid of the node on `port` when it is the redis-server its pidfile names (never a stale or foreign pid). */
export function nodePid(layout: RedisLayout, port: number): number | undefined {
  return ownedServerPid(pidFile(layout, port), port, 'redis-server');
}

/** True once the node in `dir` has been part of a cluster: its nodes.conf knows another node. (A node writes a
 * nodes.conf naming only itself as soon as it starts, so the file's presence alone says nothing.) */
export function joinedCluster(dir: string): boolean {
  const file = join(dir, 'nodes.conf');
  if (!existsSync(file)) return false;
  return (
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() && !l.startsWith('vars ')).length > 1
  );
}

/** Every node reports cluster_state:ok and at least 3 masters + 3 replicas are up (fault tests reuse it). */
export function clusterHealthy(ports: number[]): boolean {
  for (const port of ports) {
    if (!redisCli(port, 'cluster', 'info').includes('cluster_state:ok')) return false;
  }
  const nodes = redisCli(ports[0]!, 'cluster', 'nodes').split('\n').filter(Boolean);
  const masters = nodes.filter((l) => l.includes('master') && !l.includes('fail'));
  const replicas = nodes.filter((l) => l.includes('slave') && !l.includes('fail'));
  return masters.length >= 3 && replicas.length >= 3;
}

/** Healthy, every node knows every other (gossip has reached them all), and every replica has finished its
 * sync (before that a WAIT cannot be acknowledged). */
async function waitClusterReady(ports: number[], timeoutMs: number): Promise<void> {
  await waitFor('redis cluster to become healthy', async () => clusterHealthy(ports), timeoutMs);
  await waitFor(
    'every node to know the others',
    async () => ports.every((p) => Number(/cluster_known_nodes:(\d+)/.exec(redisCli(p, 'cluster', 'info'))?.[1] ?? 0) >= ports.length),
    timeoutMs,
  );
  await waitFor(
    'replicas to sync',
    async () =>
      ports.every((p) => {
        const info = redisCli(p, 'info', 'replication');
        return info.includes('role:master') || info.includes('master_link_status:up');
      }),
    timeoutMs,
  );
}

/** Settings from deploy/redis/redis.conf that change what a deduction costs (that file says why), given to every
 * node at start and set again on the nodes of a cluster that is reused, which may predate them. */
export const TUNED_SETTINGS: readonly (readonly [string, string])[] = [['stream-node-max-bytes', '512']];

function applyTunedSettings(ports: number[]): void {
  for (const port of ports) for (const [name, value] of TUNED_SETTINGS) redisCli(port, 'config', 'set', name, value);
}

/** Starts one cluster-enabled redis-server, daemonized, with its nodes.conf, data, pidfile and log in `dir`. */
export function startRedisNode(port: number, dir: string, options: RedisNodeOptions = {}): void {
  mkdirSync(dir, { recursive: true });
  const persistence =
    (options.persistence ?? 'aof') === 'aof' ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no'];
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
      // No RDB snapshots: the AOF is what a restarted node loads.
      '--save',
      '',
      ...persistence,
      '--maxmemory-policy',
      'noeviction',
      ...TUNED_SETTINGS.flatMap(([name, value]) => [`--${name}`, value]),
    ],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) throw new Error(`redis-server on ${port} failed to start`);
}

/** `redis-cli --cluster create` over empty nodes, one replica per master. */
async function formCluster(ports: number[]): Promise<void> {
  const create = spawnSync(
    'redis-cli',
    ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'],
    { encoding: 'utf8' },
  );
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
  await waitClusterReady(ports, 30_000);
}

/**
 * Brings the cluster of `layout` up without deleting anything: reuses it when healthy; otherwise starts each
 * missing node from its own directory (it rejoins from nodes.conf and loads its AOF); creates a cluster only
 * when no node directory has ever been part of one. A port held by a server this stack did not start is an error.
 */
export async function redisUp(layout: RedisLayout): Promise<RedisUpResult> {
  const { ports, dirOf } = layout;
  const answering = await Promise.all(ports.map((p) => portOpen(p)));
  if (answering.every(Boolean) && clusterHealthy(ports)) {
    applyTunedSettings(ports);
    return { action: 'reused', started: [] };
  }
  const foreign = ports.filter((p, i) => answering[i] && nodePid(layout, p) === undefined);
  if (foreign.length > 0) {
    throw new Error(`port ${foreign.join(', ')} is taken by a process this stack did not start; free it or set SHARDSTOCK_REDIS_NODES`);
  }
  const missing = ports.filter((_, i) => !answering[i]);
  const joined = new Map(ports.map((p) => [p, joinedCluster(dirOf(p))]));

  if (![...joined.values()].some(Boolean)) {
    for (const port of missing) startRedisNode(port, dirOf(port));
    await waitFor('redis nodes', () => allOpen(ports), 10_000);
    await formCluster(ports);
    return { action: 'created', started: missing };
  }

  const lost = new Map(missing.filter((p) => !joined.get(p)).map((p) => [p, idsAt(ports, p)]));
  for (const port of missing) {
    const id = emptyMasterId(dirOf(port));
    if (id !== undefined) await waitForTakeover(ports, port, id);
  }
  for (const port of missing) startRedisNode(port, dirOf(port));
  await waitFor('redis nodes', () => allOpen(missing), 10_000);
  for (const [port, oldIds] of lost) {
    log(`redis ${port}: its directory held no cluster state; it rejoins empty, as a replica`);
    rejoinEmptyNode(ports, port, oldIds);
  }
  try {
    await waitClusterReady(ports, 30_000);
  } catch (err) {
    throw new Error(
      `${(err as Error).message}: nothing was deleted. \`npm run stack -- status\` shows the nodes; ` +
        '`npm run stack -- reset` deletes the local cluster so that `up` creates a new one',
    );
  }
  applyTunedSettings(ports);
  return { action: missing.length > 0 ? 'restarted' : 'reused', started: missing };
}

/** SIGTERMs each node that is really this stack's (it writes its AOF and nodes.conf on the way out) and waits
 * for it to exit. Returns the ports it stopped and those it left running because their server is not ours. */
export async function redisDown(layout: RedisLayout): Promise<{ stopped: number[]; notOurs: number[] }> {
  const stopped = layout.ports.filter((p) => signalOwnedServer(pidFile(layout, p), p, 'redis-server', 'SIGTERM'));
  const notOurs: number[] = [];
  for (const port of layout.ports) if (!stopped.includes(port) && (await portOpen(port))) notOurs.push(port);
  await waitFor('redis nodes to exit', () => allClosed(stopped), 15_000);
  return { stopped, notOurs };
}

/** What a reset of `layout` would delete: every node directory, except one whose port is held by a server this
 * stack did not start (deleting under it could break it). Reads only. */
export async function redisResetPlan(layout: RedisLayout): Promise<{ deleted: string[]; kept: string[] }> {
  const taken = new Set<number>();
  for (const port of layout.ports) {
    if (nodePid(layout, port) === undefined && (await portOpen(port))) taken.add(port);
  }
  return {
    deleted: layout.ports.filter((p) => !taken.has(p) && existsSync(layout.dirOf(p))).map((p) => layout.dirOf(p)),
    kept: [...taken].map((p) => layout.dirOf(p)),
  };
}

/** The only path that deletes: names the directories it will delete, stops this stack's nodes, then deletes
 * those directories. */
export async function redisReset(layout: RedisLayout): Promise<{ deleted: string[]; kept: string[] }> {
  const plan = await redisResetPlan(layout);
  announceReset(plan.deleted, plan.kept);
  await redisDown(layout);
  for (const dir of plan.deleted) rmSync(dir, { recursive: true, force: true });
  return plan;
}

/** Says what a reset is about to delete (and keep), before it deletes anything. */
export function announceReset(deleted: string[], kept: string[]): void {
  log(deleted.length > 0 ? `reset deletes:\n${deleted.map((d) => `  ${d}`).join('\n')}` : 'reset: nothing to delete');
  for (const dir of kept) log(`reset keeps ${dir}: a process this stack did not start still uses its port`);
}

/**
 * A new, empty cluster for a test fixture's private ports: kills the fixture's own earlier nodes (verified by
 * pidfile and port), wipes their directories and forms a cluster. Never used on the stack's own ports.
 */
export async function createRedisCluster(ports: number[], dirOf: (port: number) => string, options: RedisNodeOptions = {}): Promise<void> {
  for (const port of ports) signalOwnedServer(join(dirOf(port), 'redis.pid'), port, 'redis-server', 'SIGKILL');
  await waitFor(`ports ${ports.join(', ')} to be free (a process this stack did not start may hold one)`, () => allClosed(ports), 10_000);
  for (const port of ports) {
    rmSync(dirOf(port), { recursive: true, force: true });
    startRedisNode(port, dirOf(port), options);
  }
  await waitFor('redis nodes', () => allOpen(ports), 10_000);
  await formCluster(ports);
}
