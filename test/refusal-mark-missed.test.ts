// A Compensate of a refused deduction must not put its units back on sale (docs/guarantees.md "Refusals never
// resell"). It knows the deduction was refused only from the mark settlement writes on the request's record, and
// a mark can miss: it finds no record while the shard is being rebuilt, and the recovery then restores the
// record from a snapshot read before the refusal, unmarked. The compensation's settlement is the backstop: it
// asks for a repair, which takes back whatever the Compensate gave. Here the mark is made to miss outright.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, type TestApp } from './support/harness.js';
import { afterRefusal, couponAheadOfMysql, ledgerFigures, refusalStore, waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await a?.close();
});

describe('a refusal mark that missed its record', () => {
  it('when a refused deduction without its mark is compensated, then the units the Compensate gave back are taken away: the next Deduct is SOLD_OUT and no second anomaly', async () => {
    const couponId = await couponAheadOfMysql(a, 'rmm', 2);

    const repairsBefore = a.app.settlement.recovery.stats.recoveries;
    const store = refusalStore(a.app);
    const real = store.markRefused.bind(store);
    let missed = 0;
    store.markRefused = async () => {
      missed++;
      return 'gone';
    };
    try {
      expect((await a.client.deduct({ couponId, requestId: 'r1', userId: 'u1', quantity: 2n })).outcome).toBe(DeductOutcome.DEDUCTED);
      // The settler commits the anomaly row and only then marks: the real mark must not be back before it tried.
      await waitFor(
        'the refusal and its missed mark',
        async () => ({ f: await ledgerFigures(a.app, couponId), missed }),
        (x) => x.f.anomalies.length === 1 && x.missed > 0,
        30_000,
        50,
      );
    } finally {
      store.markRefused = real;
    }
    expect((await a.client.getDeduction({ couponId, requestId: 'r1' })).redis?.refused).toBe(false);
    // The repair the refusal asked for runs first, with nothing to lower (Redis holds 0 of a bound of 0).
    await waitFor(
      "the refusal's repair",
      async () => a.app.settlement.recovery.stats.recoveries,
      (n) => n > repairsBefore,
      10_000,
      50,
    );

    const recoveries = a.app.settlement.recovery.stats.recoveries;
    const c = await a.client.compensate({ couponId, requestId: 'r1', reason: 'order cancelled' });
    expect(c.outcome).toBe(CompensateOutcome.COMPENSATED);
    // Unmarked, the Compensate put the 2 units back on sale.
    expect((await a.client.reconcile({ couponId })).redisAvailable).toBe(2n);
    await waitFor(
      'the compensation settled (an anomaly of a refused deduction) and the repair after it',
      async () => ({ f: await ledgerFigures(a.app, couponId), recoveries: a.app.settlement.recovery.stats.recoveries }),
      (x) => x.f.anomalies.length === 2 && x.recoveries > recoveries,
      30_000,
      50,
    ).catch(() => undefined);
    const rec = await a.client.reconcile({ couponId });
    const next = await a.client.deduct({ couponId, requestId: 'r2', userId: 'u2', quantity: 1n });
    await waitFor(
      'r2 settled or refused',
      () => ledgerFigures(a.app, couponId),
      (f) => f.deductRows + f.anomalies.length >= 3,
      5000,
      50,
    ).catch(() => undefined);
    expect(await afterRefusal(a.app, couponId, rec, next)).toEqual({ redisAvailable: 0n, next: 'SOLD_OUT', refusedDeductions: 1 });
  });
});
