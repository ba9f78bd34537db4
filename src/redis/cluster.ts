// The ioredis Cluster client, with every Lua script under lua/ registered through defineCommand: EVALSHA with
// the NOSCRIPT fallback (scripts are cached per node, and a promoted replica has none) is the client's job.
// The typed callers of those scripts are in scripts.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { Cluster } from 'ioredis';

const LUA_DIR = new URL('../../lua/', import.meta.url);

export interface RedisClusterOptions {
  nodes: { host: string; port: number }[];
  /** ACL user; default the `default` user. */
  username?: string | undefined;
  password?: string | undefined;
  /** TLS to every node (PEM contents); undefined = plaintext. */
  tls?: { ca?: Buffer | undefined; cert?: Buffer | undefined; key?: Buffer | undefined } | undefined;
}

/** Script name -> number of keys, read from the file names (`deduct-7.lua`). */
export function luaScripts(): Map<string, { numberOfKeys: number; lua: string }> {
  const scripts = new Map<string, { numberOfKeys: number; lua: string }>();
  for (const file of readdirSync(LUA_DIR)) {
    const m = /^([a-z-]+)-(\d+)\.lua$/.exec(file);
    if (!m) continue;
    const name = m[1]!.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    scripts.set(name, { numberOfKeys: Number(m[2]), lua: withIncludes(readFileSync(new URL(file, LUA_DIR), 'utf8')) });
  }
  return scripts;
}

/** Replaces each `-- @include <name>` line with lua/includes/<name>.lua: Lua shared by several scripts lives
 * once, as BullMQ's includes do (a script sent to Redis must be one self-contained text). */
function withIncludes(lua: string): string {
  return lua.replace(/^-- @include ([a-z-]+)$/gm, (_, name: string) =>
    readFileSync(new URL(`includes/${name}.lua`, LUA_DIR), 'utf8').trimEnd(),
  );
}

export function connectCluster(options: RedisClusterOptions): Cluster {
  const cluster = new Cluster(options.nodes, {
    // Every script has a fixed key count, so autopipelining routes them correctly (a dynamic key count is
    // mis-routed under autopipelining in Cluster mode: ioredis issue #2109).
    enableAutoPipelining: true,
    scaleReads: 'master',
    // Commands issued while no connection or slot map is available wait in the offline queue (through a
    // failover's reconnect), bounded by maxRetriesPerRequest and commandTimeout below; a call that still
    // fails gets UNAVAILABLE and its caller retries with the same request_id.
    enableOfflineQueue: true,
    retryDelayOnClusterDown: 200,
    retryDelayOnFailover: 200,
    retryDelayOnTryAgain: 100,
    maxRedirections: 16,
    slotsRefreshTimeout: 2000,
    redisOptions: {
      username: options.username,
      password: options.password,
      // Nodes are announced by IP: their certificates need the IPs as subjectAltNames.
      ...(options.tls ? { tls: { ...options.tls } } : {}),
      maxRetriesPerRequest: 2,
      connectTimeout: 2000,
      commandTimeout: 5000,
    },
    clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
  });
  for (const [name, def] of luaScripts()) cluster.defineCommand(name, def);
  return cluster;
}
