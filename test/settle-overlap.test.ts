// The settler's fast path (src/settlement/settle/fast-settle.ts) on real MariaDB and Redis: batches it settles
// whole, and the batches it must leave to the careful path (ledger-store.ts) — repeats, deductions the remaining
// cannot cover, compensations whose deduction has not settled, coupons with anomalies — settled exactly as the
// careful path alone would, also with several batches of one coupon at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SettlementEvent } from '../src/settlement/event.js';
import { FastSettle } from '../src/settlement/settle/fast-settle.js';
import { RedisRefusalStore } from '../src/settlement/settle/refusal-store.js';
import { Settler } from '../src/settlement/settle/settler.js';
import { newSettlementStats, type SettleStats } from '../src/settlement/stats.js';
import type { EntityManager } from '@mikro-orm/mysql';
import { compensationOf as C, type Delivery, deductEvent as D, delivery } from './support/settle-deliveries.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures } from './support/settlement.js';

let t: TestApp;
beforeAll(async () => {
  // No workers: only the settlers these tests build settle anything.
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

/** The fast path with its COMMIT's answer lost: after the commit went through, or before it reached the server. */
class UnansweredCommit extends FastSettle {
  constructor(private readonly committed: boolean) {
    super(t.app.orm);
  }

  protected override async transaction(body: (em: EntityManager) => Promise<void>): Promise<void> {
    if (this.committed) await super.transaction(body);
    else
      await super.transaction(async (em) => {
        await body(em);
        throw new Error('connection lost before COMMIT');
      });
    throw new Error('connection lost: no answer to COMMIT');
  }
}

function settler(stats: SettleStats, fast: FastSettle = new FastSettle(t.app.orm)): Settler {
  return new Settler(
    {
      consumer: () => Promise.reject(new Error('not started: batches are handed over')),
      ledger: t.app.settlement.ledger,
      fast,
      refusals: new RedisRefusalStore(t.app.redis, t.namespace, t.app.config.idempotencyWindowS),
      // Nothing else of the coupon is on its way: a deduction the remaining cannot cover is refused at once.
      compensationsInFlight: async () => new Map(),
      stats,
    },
    { batch: 10_000, maxDeliver: 5, concurrency: 4 },
  );
}

async function coupon(total: number): Promise<string> {
  const id = uniqueId();
  await t.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 2 });
  return id;
}

async function version(couponId: string): Promise<number> {
  const [r] = await t.app.orm.em.fork().execute<{ version: number }[]>('select version from coupon where id = ?', [couponId]);
  return Number(r?.version);
}

async function ledgerRow(couponId: string, requestId: string, kind: string): Promise<boolean> {
  const rows = await t.app.orm.em
    .fork()
    .execute('select 1 from stock_ledger where coupon_id = ? and request_id = ? and kind = ?', [couponId, requestId, kind]);
  return rows.length > 0;
}

describe('settlement fast path', () => {
  it('when a batch is all new and covered, then one fast transaction settles it exactly and bumps the version once', async () => {
    const id = await coupon(10_000);
    const stats = newSettlementStats().settle;
    const s = settler(stats);
    const ds = Array.from({ length: 600 }, (_, i) => D(id, `r-${i}`, 1 + (i % 3)));
    // Compensations of deductions in the same batch, one of them before its deduction.
    const batch1 = [C(ds[0]!), ...ds, ...ds.slice(1, 100).map(C)];
    const before = await version(id);
    expect(await s.handle(batch1.map(delivery))).toBe(0);
    expect(stats.fastBatches).toBe(1);
    expect(await version(id)).toBe(before + 1);
    // Compensations of deductions settled earlier (their DEDUCT rows are in the ledger).
    const batch2 = ds.slice(100, 200).map(C);
    const msgs2 = batch2.map(delivery);
    expect(await s.handle(msgs2)).toBe(0);
    expect(stats.fastBatches).toBe(2);
    expect(msgs2.every((m) => m.outcome === 'acked')).toBe(true);

    const compensated = [...batch1, ...batch2].filter((e) => e.kind === 'C');
    const deductedUnits = ds.reduce((n, e) => n + e.quantity, 0);
    const compensatedUnits = compensated.reduce((n, e) => n + e.quantity, 0);
    const f = await ledgerFigures(t.app, id);
    expect(f).toMatchObject({
      deductRows: ds.length,
      deductUnits: deductedUnits,
      compensateRows: compensated.length,
      compensateUnits: compensatedUnits,
      duplicates: 0,
      anomalies: [],
      remaining: 10_000 - deductedUnits + compensatedUnits,
    });
    expect(stats.applied).toBe(batch1.length + batch2.length);
    expect(await version(id)).toBe(before + 2);
  });

  it('when events are delivered again, alone or with new ones, then the batch falls back and nothing is counted twice', async () => {
    const id = await coupon(1000);
    const stats = newSettlementStats().settle;
    const s = settler(stats);
    const ds = Array.from({ length: 20 }, (_, i) => D(id, `r-${i}`, 2));
    expect(await s.handle(ds.slice(0, 10).map(delivery))).toBe(0);
    expect(stats.fastBatches).toBe(1);
    // Half redelivered, half new; then all of it again; then a batch repeating one event within itself.
    const mixed = ds.slice(5, 20).map(delivery);
    expect(await s.handle(mixed)).toBe(0);
    expect(await s.handle(ds.map(delivery))).toBe(0);
    const extra = D(id, 'r-extra', 5);
    expect(await s.handle([extra, extra].map(delivery))).toBe(0);
    expect(stats.fastBatches).toBe(1);
    expect(mixed.every((m) => m.outcome === 'acked')).toBe(true);
    const f = await ledgerFigures(t.app, id);
    expect(f).toMatchObject({ deductRows: 21, deductUnits: 45, duplicates: 0, anomalies: [], remaining: 1000 - 45 });
    expect(stats.applied).toBe(21);
    expect(stats.duplicates).toBe(5 + 20 + 1);
  });

  it('when a compensation arrives before its deduction settled, then it is left to the careful path and waits', async () => {
    const id = await coupon(100);
    const stats = newSettlementStats().settle;
    const s = settler(stats);
    const d = D(id, 'r-late', 7);
    const early = delivery(C(d));
    expect(await s.handle([early])).toBe(0);
    expect(stats.fastBatches).toBe(0);
    expect(early.outcome).toBe('nakked');
    expect(stats.deferred).toBe(1);
    expect((await ledgerFigures(t.app, id)).remaining).toBe(100);
    expect(await ledgerRow(id, 'r-late', 'COMPENSATE')).toBe(false);
    // Once the deduction settled, the compensation goes the fast way.
    expect(await s.handle([delivery(d)])).toBe(0);
    expect(await s.handle([delivery(C(d))])).toBe(0);
    expect(stats.fastBatches).toBe(2);
    expect((await ledgerFigures(t.app, id)).remaining).toBe(100);
  });

  it('when the units a batch deducts exceed the remaining, then it falls back and the careful path refuses what cannot be covered', async () => {
    const id = await coupon(100);
    const stats = newSettlementStats().settle;
    const s = settler(stats);
    // Deducted 130 > 100 although the net (90) fits: the careful path settles it whole, but not the fast one.
    const a = D(id, 'r-a', 70);
    const b = D(id, 'r-b', 60);
    expect(await s.handle([a, b, C(b)].map(delivery))).toBe(0);
    expect(stats.fastBatches).toBe(0);
    expect(await ledgerFigures(t.app, id)).toMatchObject({ deductRows: 2, compensateRows: 1, anomalies: [], remaining: 30 });
    // Deducted 40 > 30, net too: refused by the careful path, recorded as an anomaly.
    const c = D(id, 'r-c', 40);
    const m = delivery(c);
    expect(await s.handle([m])).toBe(0);
    expect(stats.fastBatches).toBe(0);
    expect(m.outcome).toBe('acked');
    expect(stats.refused).toBe(1);
    const f = await ledgerFigures(t.app, id);
    expect(f).toMatchObject({ deductRows: 2, deductUnits: 130, remaining: 30 });
    expect(f.anomalies).toEqual([
      { eventId: expect.stringContaining('r-c'), reason: 'insufficient_settled_remaining', quantity: 40, refunded: false },
    ]);
  });

  it('when the coupon has an anomaly, then its batches take the careful path: a refused deduction delivered again stays refused', async () => {
    const id = await coupon(100);
    const stats = newSettlementStats().settle;
    const s = settler(stats);
    const a = D(id, 'r-a', 70);
    const refused = D(id, 'r-refused', 40);
    expect(await s.handle([delivery(a)])).toBe(0);
    expect(await s.handle([delivery(refused)])).toBe(0);
    expect(stats.refused).toBe(1);
    expect(stats.fastBatches).toBe(1);
    // Room again (100), then the refused deduction comes back with a new one: both would fit.
    expect(await s.handle([delivery(C(a))])).toBe(0);
    const again = delivery(refused);
    expect(await s.handle([again, delivery(D(id, 'r-new', 10))])).toBe(0);
    expect(stats.fastBatches).toBe(1);
    expect(again.outcome).toBe('acked');
    expect(await ledgerRow(id, 'r-refused', 'DEDUCT')).toBe(false);
    const f = await ledgerFigures(t.app, id);
    expect(f).toMatchObject({ deductRows: 2, deductUnits: 80, compensateUnits: 70, remaining: 90 });
    expect(f.anomalies).toHaveLength(1);
  });

  it('when batches of one coupon settle at once, then the figures stay exact and what does not fit is refused, never settled', async () => {
    const id = await coupon(1000);
    const stats = newSettlementStats().settle;
    // Two settlers, two batches each, all at once: 8 × 50 deductions of 3 units = 1200 units for 1000.
    const settlers = [settler(stats), settler(stats)];
    const ds = Array.from({ length: 400 }, (_, i) => D(id, `r-${i}`, 3));
    const batches = Array.from({ length: 8 }, (_, b) => ds.slice(b * 50, b * 50 + 50));
    const eventOf = new Map<Delivery, SettlementEvent>();
    const send = (es: SettlementEvent[]) =>
      es.map((e) => {
        const m = delivery(e);
        eventOf.set(m, e);
        return m;
      });
    let sent = batches.map(send);
    await Promise.all(sent.map((b, i) => settlers[i % 2]!.handle(b)));
    expect(stats.fastBatches).toBeGreaterThanOrEqual(1);
    // A deduction that did not fit while another batch settled is held rather than refused (its look for room
    // was stale): delivered again, as JetStream would, until each is settled or refused.
    for (let round = 0; round < 5; round++) {
      const nakked = sent.flat().filter((m) => m.outcome === 'nakked');
      if (nakked.length === 0) break;
      sent = [send(nakked.map((m) => eventOf.get(m)!))];
      await settlers[round % 2]!.handle(sent[0]!);
    }
    expect(sent.flat().filter((m) => m.outcome !== 'acked')).toEqual([]);
    let f = await ledgerFigures(t.app, id);
    expect(f.duplicates).toBe(0);
    expect(f.remaining).toBeGreaterThanOrEqual(0);
    expect(f.remaining).toBe(1000 - f.deductUnits);
    expect(f.deductRows + f.anomalies.length).toBe(400);
    expect(f.deductUnits + f.anomalies.reduce((n, a) => n + a.quantity, 0)).toBe(1200);
    expect(f.deductRows).toBe(333);

    // Compensations of the settled deductions, in concurrent batches: the careful path (the coupon now has
    // anomalies) gives every unit back exactly once.
    const settledIds: string[] = [];
    for (const d of ds) if (await ledgerRow(id, d.requestId, 'DEDUCT')) settledIds.push(d.requestId);
    const cs = settledIds.slice(0, 200).map((r) => C(D(id, r, 3)));
    await Promise.all([0, 1, 2, 3].map((i) => settlers[i % 2]!.handle(cs.slice(i * 50, i * 50 + 50).map(delivery))));
    f = await ledgerFigures(t.app, id);
    expect(f).toMatchObject({ compensateRows: 200, compensateUnits: 600, remaining: 1 + 600, duplicates: 0 });
  });

  it('when compensations of one coupon settle fast in concurrent batches, then each unit comes back exactly once', async () => {
    const id = await coupon(10_000);
    const stats = newSettlementStats().settle;
    const settlers = [settler(stats), settler(stats)];
    const ds = Array.from({ length: 1000 }, (_, i) => D(id, `r-${i}`, 1 + (i % 5)));
    const batches = Array.from({ length: 4 }, (_, b) => ds.slice(b * 250, b * 250 + 250));
    await Promise.all(batches.map((b, i) => settlers[i % 2]!.handle(b.map(delivery))));
    // Each batch also compensates half of another batch's deductions, now in the ledger.
    const next = Array.from({ length: 4 }, (_, b) => [
      ...Array.from({ length: 100 }, (_, i) => D(id, `s-${b}-${i}`, 2)),
      ...batches[(b + 1) % 4]!.slice(0, 125).map(C),
    ]);
    await Promise.all(next.map((b, i) => settlers[i % 2]!.handle(b.map(delivery))));
    expect(stats.fastBatches).toBe(8);
    const deducted = ds.reduce((n, e) => n + e.quantity, 0) + 800;
    const compensated = next.flat().reduce((n, e) => n + (e.kind === 'C' ? e.quantity : 0), 0);
    const f = await ledgerFigures(t.app, id);
    expect(f).toMatchObject({
      deductRows: 1400,
      deductUnits: deducted,
      compensateRows: 500,
      compensateUnits: compensated,
      duplicates: 0,
      anomalies: [],
      remaining: 10_000 - deducted + compensated,
    });
  });

  for (const committed of [true, false]) {
    it(`when a fast COMMIT gets no answer (${committed ? 'it committed' : 'it did not'}), then the batch is settled again through the careful path, once, before its acks`, async () => {
      const id = await coupon(1000);
      const stats = newSettlementStats().settle;
      const s = settler(stats, new UnansweredCommit(committed));
      const ds = Array.from({ length: 50 }, (_, i) => D(id, `r-${i}`, 2));
      const events = [...ds, ...ds.slice(0, 10).map(C)];
      const msgs = events.map(delivery);
      expect(await s.handle(msgs)).toBe(0);
      expect(stats.unknownOutcomes).toBe(1);
      expect(stats.fastBatches).toBe(0);
      expect(msgs.every((m) => m.outcome === 'acked')).toBe(true);
      expect(stats.applied + stats.duplicates).toBe(events.length);
      expect(stats.applied).toBe(committed ? 0 : events.length);
      expect(await ledgerFigures(t.app, id)).toMatchObject({
        deductRows: 50,
        deductUnits: 100,
        compensateRows: 10,
        compensateUnits: 20,
        duplicates: 0,
        anomalies: [],
        remaining: 1000 - 100 + 20,
      });
    });
  }
});
