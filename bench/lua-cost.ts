// Redis CPU of the group commit's script alone: node-batch-1.lua run on a throwaway standalone redis-server
// (no replication, no AOF, nothing else on it), S shards of B new Deducts per call, 4 calls in flight. Prints the
// script's µs per call and per request (INFO commandstats) and what its nested commands took, per request: so a
// change to the Lua can be A/B-tested in about ten seconds, apart from the service, the cluster and the machine's
// other load. SHARDSTOCK_LUA_FILE runs another copy of the script (with its includes already inlined) instead.
//
// `npx tsx bench/lua-cost.ts [shards] [perShard] [calls] [port]` (defaults 5 5 4000 7291). With
// SHARDSTOCK_LUA_FRESH=1 every call goes to shards never written before (made as CreateCoupon makes them: the
// hash and an empty outbox with its consumer group), as in the many-coupons scenario where a request is
// usually the first on its shard in a long while; otherwise the same S shards take every call.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { TUNED_SETTINGS } from '../deploy/local/redis-cluster.js';
import { luaScript } from '../src/redis/cluster.js';

const S = Number(process.argv[2] ?? 5);
const B = Number(process.argv[3] ?? 5);
const CALLS = Number(process.argv[4] ?? 4000);
const PORT = Number(process.argv[5] ?? 7291);
const IN_FLIGHT = 4;
const FRESH = process.env.SHARDSTOCK_LUA_FRESH === '1';

// The cluster's own tuning (deploy/redis/redis.conf) applies here too: a stream node's preallocation is a large
// share of a fresh shard's XADD.
const tuned = TUNED_SETTINGS.flatMap(([name, value]) => [`--${name}`, value]);
const server = spawn('redis-server', ['--port', String(PORT), '--save', '', '--appendonly', 'no', '--bind', '127.0.0.1', ...tuned], {
  stdio: 'ignore',
});
const r = new Redis({ port: PORT, lazyConnect: true, retryStrategy: () => null });
r.on('error', () => {}); // refused while the server starts: connect() below retries
try {
  for (let i = 0; ; i++) {
    try {
      await r.connect();
      break;
    } catch (err) {
      if (i === 50) throw err;
      await new Promise((res) => setTimeout(res, 100));
    }
  }
  const text = process.env.SHARDSTOCK_LUA_FILE ? readFileSync(process.env.SHARDSTOCK_LUA_FILE, 'utf8') : luaScript('nodeBatch').lua;
  const sha = (await r.script('LOAD', text)) as string;
  const shardKeys = (i: number) => {
    const k = `lc:{c#${i}.1}`;
    return [`${k}:shard`, `${k}:rq:a`, `${k}:rq:b`, `${k}:rq:c`, `${k}:users`, `${k}:outbox`, `${k}:ack`, `${k}:holds`];
  };
  const made = FRESH ? S * (CALLS + 200) : S;
  for (let i = 0; i < made; i += 500) {
    const p = r.pipeline();
    for (let j = i; j < Math.min(made, i + 500); j++) {
      const k = shardKeys(j);
      p.hset(k[0]!, 'avail', '1000000000', 'net', '0', 'ep', 'e1');
      if (FRESH) p.xgroup('CREATE', k[5]!, 'relay', '0', 'MKSTREAM');
    }
    await p.exec();
  }
  let nextShard = 0;
  const callShards = () => {
    if (!FRESH) return Array.from({ length: S }, (_, i) => shardKeys(i));
    return Array.from({ length: S }, () => shardKeys(nextShard++));
  };
  const windowS = 3600;
  const first = Math.floor(Date.now() / 1000 / windowS + 0.5) - 2;
  let seq = 0;
  // Ids as the benchmark's load generator makes them (bench/request-template.ts).
  const id = (kind: string, n: number) => `20261203-fs-shardstock-256-${kind}${String(n).padStart(10, '0')}`;
  const args = (): (string | number)[] => {
    const shards = callShards();
    const a: (string | number)[] = [shards[0]![0]!];
    shards.forEach((k, si) => {
      a.push(...k, windowS, first, 'lc', si, Date.now(), 1, B);
      for (let i = 0; i < B; i++) {
        const n = seq++;
        a.push('D', id('r', n), id('r', n), id('u', n), 1, 0);
      }
    });
    return a;
  };
  const run = async (calls: number) => {
    let left = calls;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (left-- > 0) {
          const out = (await r.evalsha(sha, 1, ...args())) as unknown[];
          if (out[0] !== 1) throw new Error(`unexpected reply ${JSON.stringify(out.slice(0, 3))}`);
        }
      }),
    );
  };
  await run(200);
  await r.config('RESETSTAT');
  await run(CALLS);
  const stats = await r.info('commandstats');
  const n = CALLS * S * B;
  const rows = [...stats.matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g)].map((m) => ({
    name: m[1]!,
    calls: Number(m[2]),
    usec: Number(m[3]),
  }));
  const ev = rows.find((x) => x.name === 'evalsha')!;
  console.log(
    `${S} ${FRESH ? 'fresh ' : ''}shards x ${B} requests per call: ${(ev.usec / ev.calls).toFixed(1)} µs per call, ${(ev.usec / n).toFixed(2)} µs per request`,
  );
  const nested = rows.filter((x) => x.name !== 'evalsha' && !x.name.startsWith('config') && x.name !== 'info');
  console.log(`nested, µs per request: ${nested.map((x) => `${x.name} ${(x.usec / n).toFixed(2)}`).join(', ')}`);
} finally {
  r.disconnect();
  server.kill();
}
