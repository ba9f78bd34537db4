// Cost of `replica` vs `leader` acknowledgement, in isolation: the same Deducts through the domain (Redis +
// WAIT, no transport) and through gRPC, at concurrency 1 (latency) and 256 (throughput), levels alternated over
// two rounds, on the local stack. `npx tsx bench/ack-cost.ts`; docs/guarantees.md has the figures. The full
// benchmark (`npm run bench -- --ack-level both`) measures the flash sale at each level.
import { loadConfig } from '../src/config.js';
import { startApp } from '../src/app/app.js';
import { createLogger } from '../src/util/logger.js';
import { createInventoryClient } from '../src/client/grpc-client.js';

const ns = `ack${Date.now() % 100000}`;
async function run(level: 'replica' | 'leader', round: number) {
  const app = await startApp(
    loadConfig({
      SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
      SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
      SHARDSTOCK_MYSQL_URL: 'mysql://root@127.0.0.1:3306/shardstock_test',
      SHARDSTOCK_NAMESPACE: ns,
      SHARDSTOCK_WORKERS: 'none',
      SHARDSTOCK_LOG_LEVEL: 'silent',
      SHARDSTOCK_ACK_LEVEL: level,
      SHARDSTOCK_MAX_IN_FLIGHT: '0',
    }),
    createLogger('silent'),
  );
  const client = createInventoryClient(`127.0.0.1:${app.grpcPort}`);
  const couponId = `ack-${level}-${round}-${Date.now()}`;
  await client.createCoupon({ couponId, totalStock: 10_000_000n, shardCount: 16 });
  let n = 0;
  const direct = (i: number) => app.deduct.deduct({ couponId, requestId: `d${i}`, userId: '', quantity: 1n });
  const viaGrpc = (i: number) => client.deduct({ couponId, requestId: `g${i}`, quantity: 1n });
  async function measure(call: (i: number) => Promise<unknown>, count: number, conc: number) {
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: conc }, async () => {
        while (next < count) await call(n + next++);
      }),
    );
    n += count;
    const ms = performance.now() - t0;
    return { perSec: Math.round((count / ms) * 1000), meanMs: +((ms / count) * conc).toFixed(3) };
  }
  await measure(direct, 2000, 64); // warm-up
  const out = {
    level,
    directSeq: await measure(direct, 1000, 1),
    direct256: await measure(direct, 20000, 256),
    grpcSeq: await measure(viaGrpc, 1000, 1),
    grpc256: await measure(viaGrpc, 20000, 256),
  };
  client.close();
  await app.close();
  return out;
}
const results = [];
for (let round = 0; round < 2; round++) for (const level of ['replica', 'leader'] as const) results.push(await run(level, round));
for (const r of results) console.log(JSON.stringify(r));
process.exit(0);
