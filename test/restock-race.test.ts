// Restocks land on the coupon row that settlement commits to all through a sale. Each must succeed on its first
// call while deductions settle and other restocks run: a conflict on the row is the service's to resolve, not
// an UNAVAILABLE for the operator to retry. And every unit counts: MySQL and Redis agree afterwards.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { drainedReconcile, ledgerFigures, waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_SETTLE_BATCH: '8' });
});
afterAll(async () => {
  await a?.close();
});

describe('restocks during a sale', () => {
  it('when 40 restocks run at once while deductions settle on the same coupon, then each succeeds on its first call and the books agree', async () => {
    const id = uniqueId('rk');
    const STOCK = 100_000;
    await a.client.createCoupon({ couponId: id, totalStock: BigInt(STOCK), shardCount: 8 });
    let stop = false;
    let deducted = 0;
    const sellers = Array.from({ length: 32 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const r = await a.client.deduct({ couponId: id, requestId: `d${w}-${i}`, quantity: 1n });
        if (r.outcome === DeductOutcome.DEDUCTED) deducted++;
      }
    });
    // Settlement is committing to the coupon's row before the restocks start.
    await waitFor(
      'settlement to be under way',
      () => ledgerFigures(a.app, id),
      (f) => f.deductRows >= 100,
      20_000,
      50,
    );
    const restocks = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => a.client.restock({ couponId: id, quantity: BigInt(i + 1), requestId: `rs-${i}` })),
    );
    stop = true;
    await Promise.all(sellers);
    const failed = restocks.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
    expect(failed).toEqual([]);
    const added = (40 * 41) / 2;

    const rec = await drainedReconcile(a.client, id, (x) => x.ledgerDeducted === BigInt(deducted), 30_000);
    expect(rec).toMatchObject({
      totalStock: BigInt(STOCK + added),
      ledgerRestocked: BigInt(added),
      settledRemaining: BigInt(STOCK + added - deducted),
      redisAvailable: BigInt(STOCK + added - deducted),
      ledgerDrift: 0n,
      redisDrift: 0n,
    });
    const f = await ledgerFigures(a.app, id);
    expect(f.duplicates).toBe(0);
  });
});
