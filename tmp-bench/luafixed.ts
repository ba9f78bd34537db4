import { Redis } from 'ioredis';
import { luaScript } from '../src/redis/cluster.js';
const r = new Redis({ port: 7001 });
async function cost(label: string, lua: string, keys: string[], args: (string|number)[], n = 3000) {
  const sha = (await r.script('LOAD', lua)) as string;
  await r.config('RESETSTAT');
  const ps = [];
  for (let i = 0; i < n; i++) ps.push(r.evalsha(sha, keys.length, ...keys, ...args).catch((e) => e));
  const res = await Promise.all(ps);
  const s = (await r.info('commandstats')) as string;
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(s)!;
  console.log(label.padEnd(40), (Number(m[2]) / Number(m[1])).toFixed(1), 'us/call', String(res[0]).slice(0, 60));
}
await cost('return 1', 'return 1', [], []);
const sb = luaScript('shardBatch').lua;
// The whole script, returning right after the definitions (before any redis.call)
const defsOnly = sb.replace(/local windowSec = tonumber\(ARGV\[1\]\)/, 'do return 1 end\nlocal windowSec = tonumber(ARGV[1])');
await cost('shard-batch definitions only', defsOnly, [], []);
await cost('TIME', "return redis.call('TIME')", [], []);
await cost('HMGET missing key', "return redis.call('HMGET', KEYS[1], 'a','b','c','d')", ['{x}k'], []);
const args13 = Array.from({ length: 13 }, (_, i) => 'argument' + i);
await cost('return 1, 7 keys 13 args', 'return 1', ['{x}a','{x}b','{x}c','{x}d','{x}e','{x}f','{x}g'], args13);
r.disconnect();
