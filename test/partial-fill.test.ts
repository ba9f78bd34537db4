// Partial fills (allow_partial) on the real stack: racing requests on the last units across two instances and
// shards are granted amounts that add up exactly to the stock, replays return the granted amount, and
// settlement records exactly what was granted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { settled } from './support/settlement.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'partial-a' });
  b = await startTestApp({ SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'partial-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

describe('allow_partial', () => {
  it('when a request asks for more than is left, then it is granted what is left; without allow_partial it is insufficient', async () => {
    const id = uniqueId('pf');
    await a.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 1 });
    const strict = await a.client.deduct({ couponId: id, requestId: 's', quantity: 8n });
    expect([strict.outcome, strict.granted]).toEqual([DeductOutcome.INSUFFICIENT, 0n]);
    const full = await a.client.deduct({ couponId: id, requestId: 'f', quantity: 2n, allowPartial: true });
    expect([full.outcome, full.granted]).toEqual([DeductOutcome.DEDUCTED, 2n]);
    const part = await a.client.deduct({ couponId: id, requestId: 'p', quantity: 8n, allowPartial: true });
    expect([part.outcome, part.granted, part.remaining]).toEqual([DeductOutcome.DEDUCTED, 3n, 0n]);
    const none = await a.client.deduct({ couponId: id, requestId: 'n', quantity: 8n, allowPartial: true });
    expect([none.outcome, none.granted]).toEqual([DeductOutcome.SOLD_OUT, 0n]);

    // A replay returns the granted amount, from either instance, also once the coupon is sold out.
    for (const t of [a, b]) {
      const again = await t.client.deduct({ couponId: id, requestId: 'p', quantity: 8n, allowPartial: true });
      expect([again.outcome, again.granted, again.replayed]).toEqual([DeductOutcome.DEDUCTED, 3n, true]);
    }
    // The same request id without allow_partial is another request: refused, never a second deduction.
    const e = await a.client.deduct({ couponId: id, requestId: 'p', quantity: 8n }).catch((err: ServiceError) => err);
    expect((e as ServiceError).code).toBe(status.FAILED_PRECONDITION);
    expect((await a.client.getStock({ couponId: id })).level?.deducted).toBe(5n);
  });

  it('when partial fills race for the last units on two instances and eight shards, then the granted amounts add up to the stock exactly and settle as granted', async () => {
    const moves = () => a.app.deduct.stats.moves + b.app.deduct.stats.moves;
    const movesBefore = moves();
    for (const [stock, callers, ask] of [
      [10, 16, 3],
      [37, 40, 4],
    ] as const) {
      const id = uniqueId('race');
      await a.client.createCoupon({ couponId: id, totalStock: BigInt(stock), shardCount: 8 });
      const calls = Array.from({ length: callers }, (_, i) =>
        (i % 2 ? a : b).client.deduct({ couponId: id, requestId: `r${i}`, quantity: BigInt(ask), allowPartial: true }),
      );
      const answers = await Promise.all(calls);
      let granted = 0n;
      for (const r of answers) {
        if (r.outcome === DeductOutcome.DEDUCTED) {
          expect(r.granted).toBeGreaterThan(0n);
          expect(r.granted).toBeLessThanOrEqual(BigInt(ask));
          granted += r.granted;
        } else {
          expect([r.outcome, r.granted]).toEqual([DeductOutcome.SOLD_OUT, 0n]);
        }
      }
      expect(granted).toBe(BigInt(stock));
      expect((await a.client.getStock({ couponId: id })).level).toMatchObject({ deducted: BigInt(stock), available: 0n });

      // Replays tell each caller the same amount again.
      for (const [i, r] of answers.entries()) {
        if (r.outcome !== DeductOutcome.DEDUCTED) continue;
        const again = await (i % 2 ? b : a).client.deduct({ couponId: id, requestId: `r${i}`, quantity: BigInt(ask), allowPartial: true });
        expect([again.replayed, again.granted]).toEqual([true, r.granted]);
      }
      const rec = await settled(a.client, id);
      expect(rec.ledgerDeducted).toBe(BigInt(stock));
      expect(rec.settledRemaining).toBe(0n);
    }
    // The last units were gathered from other shards (fallback moves), not only found on the home shard.
    expect(moves()).toBeGreaterThan(movesBefore);
  });
});
