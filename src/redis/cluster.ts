// The ioredis Cluster client, with every Lua script under lua/ registered through defineCommand: EVALSHA with
// the NOSCRIPT fallback (scripts are cached per node, and a promoted replica has none) is the client's job.
// The typed callers of those scripts are in scripts.ts.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Cluster, type Command } from 'ioredis';

const LUA_DIR = new URL('../../lua/', import.meta.url);

export interface RedisClusterOptions {
  nodes: { host: string; port: number }[];
  /** ACL user; default the `default` user. */
  username?: string | undefined;
  password?: string | undefined;
  /** TLS to every node (PEM contents); undefined = plaintext. */
  tls?: { ca?: Buffer | undefined; cert?: Buffer | undefined; key?: Buffer | undefined } | undefined;
  /** How often the slot map is refreshed even when nothing asked for it; 0 = never (tests). Default 1,000 ms. */
  slotsRefreshMs?: number | undefined;
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

let scriptCache: Map<string, { numberOfKeys: number; lua: string }> | undefined;

/** One script by name, with the SHA1 that EVALSHA names it by: for a caller that sends it on a node's
 * connection itself rather than through the registered command. */
export function luaScript(name: string): { numberOfKeys: number; lua: string; sha: string } {
  scriptCache ??= luaScripts();
  const s = scriptCache.get(name);
  if (!s) throw new Error(`Lua script ${name} is not under lua/`);
  return { ...s, sha: createHash('sha1').update(s.lua).digest('hex') };
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
    // Bounds how long a node can stay out of the client's connection pool: see healRawRedirects.
    slotsRefreshInterval: options.slotsRefreshMs ?? SLOTS_REFRESH_MS,
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
  healRawRedirects(cluster);
  return cluster;
}

const SLOTS_REFRESH_MS = 1000;

/** A MOVED or ASK reply: the command did not run on the node that answered. */
export function isRedirect(err: unknown): boolean {
  return err instanceof Error && (err.message.startsWith('MOVED ') || err.message.startsWith('ASK '));
}

/** ioredis follows a redirect itself, and repairs its routing, only for a command sent alone. A command of an
 * auto-pipelined batch that mixed slots (or held a write that succeeded) gets the MOVED back raw, and nothing is
 * repaired (Pipeline.fillResult). That matters after a node dies and comes back at its old address: the
 * client dropped its connection when the node died, the slot map still names it, and until a slot refresh
 * re-adds it every pipelined command for its slots goes to a random node and is MOVED back, for ever under
 * steady pipelined traffic. So a raw redirect reaching any caller asks for a refresh at once (ioredis
 * coalesces them), and the periodic refresh above catches what no caller saw. */
function healRawRedirects(cluster: Cluster): void {
  const onReply = (err: unknown) => {
    if (isRedirect(err)) cluster.refreshSlotsCache();
  };
  const send = cluster.sendCommand.bind(cluster);
  cluster.sendCommand = (command: Command, stream?: unknown, node?: unknown) => {
    const sent = send(command, stream as never, node);
    // Only pipelined commands (sent with their node): ioredis handles redirects of the others itself.
    if (node !== undefined) command.promise.catch(onReply);
    return sent;
  };
}
