// Reconcile on a coupon under load (deductions, compensations and a restock, relay and settle running): its
// reads are ordered so that a snapshot can only make Redis look LOW against its bound. Every sample taken
// mid-flight must have redisDrift <= 0, and the quiet coupon must come out exact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { sleep, waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await a?.close();
});

describe('reconcile under load', () => {
  it('when deductions, compensations and a restock settle while Reconcile is sampled, then no sample shows Redis above its bound', async () => {
    const couponId = uniqueId('rl');
    const N = 4800;
    await a.client.createCoupon({ couponId, totalStock: 4000n, shardCount: 4 });
    let sampling = true;
    const drifts: bigint[] = [];
    let midFlight = 0;
    const sampler = (async () => {
      while (sampling) {
        // A failed sample (a dependency slow under load) proves nothing either way: skipped.
        const r = await a.client.reconcile({ couponId }).catch(() => null);
        if (r) drifts.push(r.redisDrift);
        if (r && (r.outboxEvents > 0 || r.jetstreamPending > 0)) midFlight++;
        await sleep(5);
      }
    })();
    // UNAVAILABLE is an unknown outcome: retried with the same request_id, as a client does.
    const retry = async <T>(call: () => Promise<T>): Promise<T> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await call();
        } catch (e) {
          if ((e as { code?: number }).code !== 14 || attempt > 20) throw e;
          await sleep(50);
        }
      }
    };
    let next = 0;
    let deducted = 0;
    let compensated = 0;
    const worker = async () => {
      for (let i = next++; i < N; i = next++) {
        if (i === N / 2) await retry(() => a.client.restock({ couponId, requestId: 'restock-1', quantity: 300n }));
        const r = await retry(() => a.client.deduct({ couponId, requestId: `d-${i}`, userId: `u-${i}`, quantity: 1n }));
        if (r.outcome !== DeductOutcome.DEDUCTED) continue;
        deducted++;
        if (i % 5 === 0) {
          await retry(() => a.client.compensate({ couponId, requestId: `d-${i}`, reason: 'cancelled' }));
          compensated++;
        }
      }
    };
    await Promise.all(Array.from({ length: 48 }, worker));
    await waitFor(
      'settled',
      () => a.client.reconcile({ couponId }),
      (r) => r.consistent && r.inFlightNet === 0n,
      30_000,
    );
    sampling = false;
    await sampler;

    // Both directions happened while sampling, and the sampler saw the coupon mid-flight many times.
    expect(deducted).toBeGreaterThan(1000);
    expect(compensated).toBeGreaterThan(100);
    expect(midFlight).toBeGreaterThan(3);
    expect(drifts.filter((d) => d > 0n)).toEqual([]);
    const end = await a.client.reconcile({ couponId });
    expect(end.redisDrift).toBe(0n);
    expect(end.ledgerDeducted - end.ledgerCompensated).toBe(BigInt(deducted - compensated));
    expect(end.settledRemaining).toBe(BigInt(4300 - deducted + compensated));
  });
});
