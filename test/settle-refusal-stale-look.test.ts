// A deduction MySQL cannot cover yet is refused (an oversell anomaly, its coupon repaired) only when no
// compensation that makes room for it is on its way (src/settlement/settle/settler.ts). That look and the
// refusal are made at different moments, and other settlers keep settling the coupon in between: a look that a
// settlement made stale must not refuse. On real MariaDB and Redis, with the interleaving forced.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventId, type SettlementEvent } from '../src/settlement/event.js';
import { FastSettle } from '../src/settlement/settle/fast-settle.js';
import type { LedgerStore } from '../src/settlement/settle/ledger-store.js';
import { RedisRefusalStore } from '../src/settlement/settle/refusal-store.js';
import { Settler } from '../src/settlement/settle/settler.js';
import { newSettlementStats } from '../src/settlement/stats.js';
import { compensationOf as C, deductEvent as D, delivery } from './support/settle-deliveries.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures } from './support/settlement.js';

let t: TestApp;
beforeAll(async () => {
  // No workers: only the settler this test builds settles anything.
  t = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await t?.close();
});

describe('refusing a deduction MySQL cannot cover', () => {
  it('when another settler settles the coupon between the look for compensations and the refusal, then the deduction is not refused: it waits, and settles once its room arrives', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 3n, shardCount: 2 });
    const ledger = t.app.settlement.ledger;
    // Redis sold, in this order: dx (the 3 units), cx gave them back, dStar sold them, cStar gave them back,
    // d sold them. Settlement so far: dx only, so MySQL has 0 left and d does not fit.
    const dx = D(id, 'dx', 3);
    const cx = C(dx);
    const dStar = D(id, 'd-star', 3);
    const cStar = C(dStar);
    const d = D(id, 'd', 3);
    const at = (e: SettlementEvent) => ({ event: e, ref: delivery(e) });
    await ledger.applyBatch(id, [at(dx)]);

    // Seen from d's settler: cStar is on its way, but its deduction is not settled, so it makes no room. Right
    // after that look, another settler settles cx and then dStar: now cStar does make room (and the remaining
    // is 0 again), so the look that found no room is stale.
    let interleaved = false;
    const racedLedger: LedgerStore = Object.assign(Object.create(ledger) as LedgerStore, {
      reconcileView: async (...args: Parameters<LedgerStore['reconcileView']>) => {
        const view = await ledger.reconcileView(...args);
        if (!interleaved) {
          interleaved = true;
          await ledger.applyBatch(id, [at(cx)]);
          await ledger.applyBatch(id, [at(dStar)]);
        }
        return view;
      },
    });
    const stats = newSettlementStats().settle;
    const settler = new Settler(
      {
        consumer: () => Promise.reject(new Error('not started: batches are handed over')),
        ledger: racedLedger,
        fast: new FastSettle(t.app.orm),
        refusals: new RedisRefusalStore(t.app.redis, t.namespace, t.app.config.idempotencyWindowS),
        compensationsInFlight: async () => new Map([[eventId(cStar), cStar]]),
        stats,
      },
      { batch: 100, maxDeliver: 5, concurrency: 1 },
    );

    const first = delivery(d);
    expect(await settler.handle([first])).toBe(0);
    expect(interleaved).toBe(true);
    expect(stats.refused).toBe(0);
    expect(first.outcome).toBe('nakked');
    expect((await ledgerFigures(t.app, id)).anomalies).toEqual([]);

    // cStar settles; d, delivered again, fits.
    await ledger.applyBatch(id, [at(cStar)]);
    const again = delivery(d);
    expect(await settler.handle([again])).toBe(0);
    expect(again.outcome).toBe('acked');
    const f = await ledgerFigures(t.app, id);
    expect(f.anomalies).toEqual([]);
    expect(f.deductRows).toBe(3);
    expect(f.compensateRows).toBe(2);
    expect(f.remaining).toBe(0);
  });
});
