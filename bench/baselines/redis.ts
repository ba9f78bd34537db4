// The baselines' Redis Cluster client: same client options as the service (src/redis/cluster.ts, with
// autopipelining), with the baseline scripts of bench/lua registered instead of the service's.
import { readdirSync, readFileSync } from 'node:fs';
import { Cluster } from 'ioredis';

const LUA_DIR = new URL('../lua/', import.meta.url);

export type Script = (...args: (string | number)[]) => Promise<unknown>;

export function connectBaselineCluster(nodes: { host: string; port: number }[]): Cluster {
  const cluster = new Cluster(nodes, {
    enableAutoPipelining: true,
    scaleReads: 'master',
    redisOptions: { maxRetriesPerRequest: 2, connectTimeout: 2000, commandTimeout: 10_000 },
  });
  for (const file of readdirSync(LUA_DIR)) {
    const m = /^([a-z-]+)-(\d+)\.lua$/.exec(file);
    if (!m) continue;
    const name = m[1]!.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    cluster.defineCommand(name, { numberOfKeys: Number(m[2]), lua: readFileSync(new URL(file, LUA_DIR), 'utf8') });
  }
  return cluster;
}

export function script(cluster: Cluster, name: string): Script {
  const fn = (cluster as unknown as Record<string, Script | undefined>)[name];
  if (typeof fn !== 'function') throw new Error(`bench Lua script ${name} is not registered`);
  return fn.bind(cluster);
}

export async function waitClusterReady(cluster: Cluster): Promise<void> {
  if (cluster.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('Redis Cluster not ready after 15 s')), 15_000);
    cluster.once('ready', () => {
      clearTimeout(t);
      resolve();
    });
  });
}
