// A load client in its own OS process: fires `count` Deducts at once (up to `concurrency` in flight) and
// prints one JSON line with every outcome, so a test can count exactly across processes.
//   npx tsx test/support/deduct-load.ts '<json args>'
import { status, type ServiceError } from '@grpc/grpc-js';
import { createInventoryClient } from '../../src/client/grpc-client.js';
import { DeductOutcome } from '../../src/gen/inventory/v1/inventory_pb.js';

interface Args {
  addrs: string[];
  couponId: string;
  count: number;
  concurrency: number;
  prefix: string;
  users?: number;
  quantity?: number;
}

const args = JSON.parse(process.argv[2]!) as Args;
const clients = args.addrs.map((a) => createInventoryClient(a));
const deducted: string[] = [];
const outcomes: Record<string, number> = {};
const errors: Record<string, number> = {};
let next = 0;

async function worker(): Promise<void> {
  while (next < args.count) {
    const i = next++;
    const requestId = `${args.prefix}-${i}`;
    const client = clients[i % clients.length]!;
    try {
      const r = await client.deduct(
        {
          couponId: args.couponId,
          requestId,
          userId: args.users ? `u${i % args.users}` : `${args.prefix}-user-${i}`,
          quantity: BigInt(args.quantity ?? 1),
        },
        { deadlineMs: 60_000 },
      );
      const name = DeductOutcome[r.outcome] ?? String(r.outcome);
      outcomes[name] = (outcomes[name] ?? 0) + 1;
      if (r.outcome === DeductOutcome.DEDUCTED) deducted.push(requestId);
    } catch (err) {
      const code = status[(err as ServiceError).code] ?? 'UNKNOWN';
      errors[code] = (errors[code] ?? 0) + 1;
    }
  }
}

await Promise.all(Array.from({ length: args.concurrency }, () => worker()));
for (const c of clients) c.close();
process.stdout.write(`${JSON.stringify({ outcomes, errors, deducted })}\n`);
