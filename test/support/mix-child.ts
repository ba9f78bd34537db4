// A separate OS process running a full service instance on a shared namespace and firing a mix of Deducts,
// Reserves and Compensates at one coupon (many in flight), then printing one JSON line with every outcome, so
// a test can count exactly across processes. With `ticks`, prints "tick" lines as calls finish (to SIGKILL it).
import { loadConfig } from '../../src/config.js';
import { startApp } from '../../src/app/app.js';
import { createLogger } from '../../src/util/logger.js';
import { createInventoryClient } from '../../src/client/grpc-client.js';
import { CompensateOutcome } from '../../src/gen/inventory/v1/inventory_pb.js';

const args = JSON.parse(process.argv[2]!) as {
  namespace: string;
  couponId: string;
  /** Calls: request i uses id `${idPrefix}-${i}` and user `u${i % users}`. */
  count: number;
  idPrefix: string;
  users: number;
  concurrency: number;
  /** Every nth successful deduction is compensated right after (0 = none). */
  compensateEvery: number;
  reserveEvery?: number;
  ticks?: boolean;
  env?: Record<string, string>;
};
const config = loadConfig({
  SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
  SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
  SHARDSTOCK_MYSQL_URL: 'mysql://root@127.0.0.1:3306/shardstock_test',
  SHARDSTOCK_NAMESPACE: args.namespace,
  SHARDSTOCK_WORKERS: 'none',
  SHARDSTOCK_LOG_LEVEL: 'silent',
  ...args.env,
});
const app = await startApp(config, createLogger('silent'));
const client = createInventoryClient(`127.0.0.1:${app.grpcPort}`);
process.stdout.write('ready\n');
const deducted: { requestId: string; userId: string; granted: number; replayed: boolean }[] = [];
const compensated: string[] = [];
const held: { requestId: string; userId: string }[] = [];
const outcomes: Record<string, number> = {};
const errors: Record<string, number> = {};
let next = 0;
let done = 0;
async function worker(): Promise<void> {
  while (next < args.count) {
    const i = next++;
    const requestId = `${args.idPrefix}-${i}`;
    const userId = `u${i % args.users}`;
    try {
      const input = { couponId: args.couponId, requestId, userId, quantity: 1n };
      const r =
        args.reserveEvery && i % args.reserveEvery === 0
          ? await app.holds.reserve({ ...input, ttlMs: 60_000 })
          : await app.deduct.deduct(input);
      const outcome = (r as { outcome: string }).outcome;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      if (outcome === 'held') held.push({ requestId, userId });
      if (outcome === 'deducted') {
        const d = r as { granted: number; replayed: boolean };
        deducted.push({ requestId, userId, granted: d.granted, replayed: d.replayed });
        if (args.compensateEvery > 0 && i % args.compensateEvery === 0 && !(args.reserveEvery && i % args.reserveEvery === 0)) {
          const c = await client.compensate({ couponId: args.couponId, requestId, reason: 'mix' });
          if (c.outcome === CompensateOutcome.COMPENSATED) compensated.push(requestId);
        }
      }
    } catch (err) {
      const kind = `${(err as { kind?: string }).kind ?? ''}: ${(err as Error).message ?? String(err)}`.slice(0, 160);
      errors[kind] = (errors[kind] ?? 0) + 1;
    }
    if (args.ticks && ++done % 10 === 0) process.stdout.write('tick\n');
  }
}
await Promise.all(Array.from({ length: args.concurrency }, () => worker()));
process.stdout.write(`${JSON.stringify({ outcomes, errors, deducted, compensated, held })}\n`);
client.close();
await app.close();
process.exit(0);
