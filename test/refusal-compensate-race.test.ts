// A deduction settlement refused stays sold: its units never go back on sale (docs/guarantees.md "Refusals never
// resell"). Redis learns of the refusal from a mark settlement writes after the anomaly row, and the mark can come
// late (a failed attempt is finished by a redelivery a second later). A Compensate of the deduction landing in
// between found no mark and put its units back on sale; the repair the refusal asked for had already run and found
// nothing to lower, so the unit sold again and was refused again: one more customer sold a unit nobody had.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, type TestApp } from './support/harness.js';
import { afterRefusal, couponAheadOfMysql, ledgerFigures, refusalStore, sleep, waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await a?.close();
});

describe('a Compensate racing the refusal mark', () => {
  it('when a refused deduction is compensated before its late refusal mark, then its units do not stay on sale: the next Deduct is SOLD_OUT and no second anomaly', async () => {
    const couponId = await couponAheadOfMysql(a, 'rcr', 2);

    // The first mark fails (a replica WAIT that timed out); the redelivery's mark waits for the test.
    const store = refusalStore(a.app);
    const real = store.markRefused.bind(store);
    let attempts = 0;
    let letMark!: () => void;
    const markAllowed = new Promise<void>((resolve) => (letMark = resolve));
    store.markRefused = async (...args) => {
      if (attempts++ === 0) throw new Error('ReplicationTimeout (injected)');
      await markAllowed;
      return real(...args);
    };
    try {
      expect((await a.client.deduct({ couponId, requestId: 'r1', userId: 'u1', quantity: 2n })).outcome).toBe(DeductOutcome.DEDUCTED);
      await waitFor(
        'the refusal',
        () => ledgerFigures(a.app, couponId),
        (f) => f.anomalies.length === 1,
        30_000,
        50,
      );
      // The repair the refusal asked for runs (nothing to lower: Redis holds 0 units of a bound of 0).
      const recoveries = a.app.settlement.recovery.stats.recoveries;
      await waitFor(
        'the repair',
        async () => a.app.settlement.recovery.stats.recoveries,
        (n) => n > recoveries,
        10_000,
        50,
      );
      await waitFor(
        'the redelivery',
        async () => attempts,
        (n) => n >= 2,
        10_000,
        50,
      );

      const c = await a.client.compensate({ couponId, requestId: 'r1', reason: 'order cancelled' });
      expect(c.outcome).toBe(CompensateOutcome.COMPENSATED);
    } finally {
      letMark();
    }
    await waitFor(
      'the refusal marked in Redis',
      () => a.client.getDeduction({ couponId, requestId: 'r1' }),
      (d) => d.redis?.refused === true,
      30_000,
    );
    // The units that Compensate put back are taken away again (they were refused: MySQL never had them).
    const rec = await waitFor(
      'Redis back within its bound',
      () => a.client.reconcile({ couponId }),
      (r) => r.redisAvailable === 0n,
      5000,
      100,
    ).catch(async () => a.client.reconcile({ couponId }));
    const next = await a.client.deduct({ couponId, requestId: 'r2', userId: 'u2', quantity: 1n });
    await sleep(1000);
    expect(await afterRefusal(a.app, couponId, rec, next)).toEqual({ redisAvailable: 0n, next: 'SOLD_OUT', refusedDeductions: 1 });
  });
});
