// Redis CPU per deduction, in isolation: the service (startApp, in process, SHARDSTOCK_WORKERS=none) against a
// private Redis Cluster of its own (3 masters + 3 replicas, AOF as the local stack's), so that no other work
// on the shared cluster lands in the figures. Runs a flash sale of Deducts through the domain (no transport)
// at a fixed number in flight, and reads every node's CPU (INFO cpu) and `INFO commandstats` before and
// after: Redis µs per deduction, masters and replicas apart, and calls and µs per command type. Nested calls
// a script makes are counted both under the script (evalsha) and under their own name.
//
// With `coupons` above 1, that many coupons of 4 shards each, requests going to each in turn (many-coupons'
// layout: about one request per shard and call), instead of one coupon of 16 shards.
//
// `npx tsx bench/redis-cost.ts [deducts] [inFlight] [basePort] [coupons]`; SHARDSTOCK_* settings pass through
// (SHARDSTOCK_SHARD_BATCH_MAX, SHARDSTOCK_SHARD_BATCH_WAIT_US, SHARDSTOCK_ACK_LEVEL). The cluster lives in
// .data/redis-cost/<port> and is stopped and deleted at the end.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { redisCli, redisDown, redisUp, type RedisLayout } from '../deploy/local/redis-cluster.js';
import { startApp } from '../src/app/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/util/logger.js';

const N = Number(process.argv[2] ?? 100_000);
const IN_FLIGHT = Number(process.argv[3] ?? 256);
const BASE = Number(process.argv[4] ?? 7231);
const COUPONS = Number(process.argv[5] ?? 1);
const ports = Array.from({ length: 6 }, (_, i) => BASE + i);
const layout: RedisLayout = { ports, dirOf: (p) => join(process.cwd(), '.data', 'redis-cost', String(p)) };

interface NodeStats {
  role: string;
  cpuS: number;
  cmd: Map<string, { calls: number; usec: number }>;
}

function stats(port: number): NodeStats {
  const role = redisCli(port, 'role').split('\n')[0]!.trim();
  const cpu = redisCli(port, 'info', 'cpu');
  const num = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(cpu)?.[1] ?? 0);
  const cmd = new Map<string, { calls: number; usec: number }>();
  for (const m of redisCli(port, 'info', 'commandstats').matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g)) {
    cmd.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return { role, cpuS: num('used_cpu_sys') + num('used_cpu_user'), cmd };
}

await redisUp(layout);
const app = await startApp(
  loadConfig({
    SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
    SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
    SHARDSTOCK_MYSQL_URL: process.env.SHARDSTOCK_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/shardstock_test',
    SHARDSTOCK_REDIS_NODES: ports
      .slice(0, 3)
      .map((p) => `127.0.0.1:${p}`)
      .join(','),
    SHARDSTOCK_NAMESPACE: `rc${Date.now() % 100000}`,
    SHARDSTOCK_WORKERS: 'none',
    SHARDSTOCK_LOG_LEVEL: 'silent',
    SHARDSTOCK_MAX_IN_FLIGHT: '0',
    ...process.env,
  }),
  createLogger('silent'),
);
const stamp = Date.now();
const couponIds = Array.from({ length: COUPONS }, (_, i) => `rc-${stamp}-${i}`);
for (let i = 0; i < COUPONS; i += 64)
  await Promise.all(
    couponIds.slice(i, i + 64).map((couponId) =>
      app.admin.create({
        couponId,
        totalStock: BigInt(Math.ceil((N * 2) / COUPONS) + 100),
        shardCount: COUPONS > 1 ? 4 : 16,
        perUserLimit: 0,
      }),
    ),
  );
let seq = 0;
async function run(count: number): Promise<number> {
  const t0 = performance.now();
  let left = count;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (left-- > 0) {
        const i = seq++;
        const couponId = couponIds[i % COUPONS]!;
        const r = await app.deduct.deduct({ couponId, requestId: `rc-r${i}`, userId: `rc-u${i}`, quantity: 1n });
        if (r.outcome !== 'deducted') throw new Error(`deduct ${i}: ${r.outcome}`);
      }
    }),
  );
  return performance.now() - t0;
}
await run(Math.min(5000, N / 10)); // warm-up: JIT, scripts loaded on every node
const before = ports.map(stats);
const ms = await run(N);
const after = ports.map(stats);
await app.close();
await redisDown(layout);
for (const p of ports) rmSync(layout.dirOf(p), { recursive: true, force: true });

const us = (s: number) => ((s * 1e6) / N).toFixed(1);
const byRole = new Map<string, number>();
const rows = new Map<string, { calls: number; usec: number }>();
ports.forEach((_, i) => {
  const a = before[i]!;
  const b = after[i]!;
  byRole.set(b.role, (byRole.get(b.role) ?? 0) + b.cpuS - a.cpuS);
  for (const [name, s] of b.cmd) {
    const p = a.cmd.get(name) ?? { calls: 0, usec: 0 };
    if (s.calls === p.calls) continue;
    const key = `${b.role} ${name}`;
    const r = rows.get(key) ?? { calls: 0, usec: 0 };
    rows.set(key, { calls: r.calls + s.calls - p.calls, usec: r.usec + s.usec - p.usec });
  }
});
const total = [...byRole.values()].reduce((x, y) => x + y, 0);
console.log(`${N} deducts at ${IN_FLIGHT} in flight over ${COUPONS} coupon(s): ${Math.round((N / ms) * 1000)}/s`);
console.log(`redis CPU per deduction: ${us(total)} µs (${[...byRole].map(([r, s]) => `${r} ${us(s)}`).join(', ')})`);
console.log('command                     calls/deduct  µs/deduct  µs/call');
for (const [k, r] of [...rows].sort((x, y) => y[1].usec - x[1].usec)) {
  console.log(
    `${k.padEnd(28)}${(r.calls / N).toFixed(3).padStart(12)}${(r.usec / N).toFixed(2).padStart(11)}${(r.usec / r.calls).toFixed(2).padStart(9)}`,
  );
}
process.exit(0);
