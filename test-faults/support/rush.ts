// A buyer rush from its own OS process: COUNT new request ids (PREFIX + n) deducted one unit each against the
// instances in ADDRS (round robin), CONCURRENCY in flight, UNAVAILABLE retried with the same id. Prints one JSON
// line: how many were DEDUCTED, SOLD_OUT, or failed for good.
import { status } from '@grpc/grpc-js';
import { createInventoryClient } from '../../src/client/grpc-client.js';
import { DeductOutcome } from '../../src/gen/inventory/v1/inventory_pb.js';

const env = (k: string) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is required`);
  return v;
};
const clients = env('ADDRS')
  .split(',')
  .map((a) => createInventoryClient(a));
const couponId = env('COUPON');
const prefix = env('PREFIX');
const count = Number(env('COUNT'));
const concurrency = Number(env('CONCURRENCY'));

let next = 0;
const out = { deducted: 0, soldOut: 0, other: 0, errors: 0 };
async function worker(): Promise<void> {
  for (let n = next++; n < count; n = next++) {
    const requestId = `${prefix}${n}`;
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await clients[(n + attempt) % clients.length]!.deduct({ couponId, requestId, quantity: 1n }, { deadlineMs: 10_000 });
        if (r.outcome === DeductOutcome.DEDUCTED) out.deducted++;
        else if (r.outcome === DeductOutcome.SOLD_OUT) out.soldOut++;
        else out.other++;
        break;
      } catch (err) {
        const code = (err as { code?: number }).code;
        if ((code !== status.UNAVAILABLE && code !== status.ABORTED) || attempt > 100) {
          out.errors++;
          process.stderr.write(`${requestId}: ${(err as Error).message}\n`);
          break;
        }
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
for (const c of clients) c.close();
console.log(JSON.stringify(out));
