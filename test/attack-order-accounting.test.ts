// Orders end to end into MySQL on two instances: deducted, compensated, reserved then confirmed, released or
// left to expire, every step raced by the same step (or its opposite) from the other instance. Once settlement
// drains, each item is deducted at most once, each order is whole or empty and its final answer (stable on
// every retry) says which, and the ledger, MySQL's remaining and Redis agree with Reconcile.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderItemRequestId } from '../src/domain/ids.js';
import { CompensateOutcome, ConfirmOutcome, OrderOutcome, ReleaseOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { uniqueId, type TestApp } from './support/harness.js';
import { closeInstances, FAST_ORDER_ENV, startOrderInstances } from './support/instance-pair.js';
import { ledgerFigures, settled, sleep, waitFor } from './support/settlement.js';
import { retryUnavailable } from './support/retry-unavailable.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  [a, b] = await startOrderInstances('acct', FAST_ORDER_ENV);
});
afterAll(() => closeInstances(a, b));

const TAKEN = new Set([OrderOutcome.DEDUCTED]);

describe('attack: order accounting across two instances', () => {
  it('when 180 orders are deducted, compensated, confirmed, released or left to expire with every step raced from both instances, then the ledger, MySQL, Redis and every retry agree exactly', async () => {
    const stocks = [400, 400, 70];
    const qty = [2, 1, 1];
    const ids = stocks.map((_, i) => uniqueId(`acct${i}`));
    await Promise.all(ids.map((couponId, i) => a.client.createCoupon({ couponId, totalStock: BigInt(stocks[i]!), shardCount: 4 })));
    const items = ids.map((couponId, i) => ({ couponId, quantity: BigInt(qty[i]!) }));
    const prefix = uniqueId('acct');
    const N = 180;
    const orderId = (i: number) => `${prefix}-${i}`;
    const user = (i: number) => `u${i % 37}`;
    const pair = (i: number): [TestApp, TestApp] => (i % 2 === 0 ? [a, b] : [b, a]);
    const cmp = (t: TestApp, id: string) =>
      retryUnavailable(() => t.client.compensate({ couponId: '', requestId: '', orderId: id, reason: 'refund' }));
    const conf = (t: TestApp, id: string) => retryUnavailable(() => t.client.confirm({ target: { case: 'orderId', value: id } }));
    const rel = (t: TestApp, id: string) =>
      retryUnavailable(() => t.client.release({ target: { case: 'orderId', value: id }, reason: 'no' }));

    const compensated = new Set<number>();
    await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const [p, q] = pair(i);
        const id = orderId(i);
        const kind = i % 6;
        if (kind <= 1) {
          const [r1, r2] = await Promise.all([
            retryUnavailable(() => p.client.deductOrder({ requestId: id, userId: user(i), items })),
            retryUnavailable(() => q.client.deductOrder({ requestId: id, userId: user(i), items })),
          ]);
          expect(r1.outcome, `order ${i}`).toBe(r2.outcome);
          if (kind === 1 && r1.outcome === OrderOutcome.DEDUCTED) {
            const cs = await Promise.all([cmp(p, id), cmp(q, id)]);
            expect(cs.map((c) => c.outcome).sort(), `order ${i}`).toEqual([
              CompensateOutcome.COMPENSATED,
              CompensateOutcome.ALREADY_COMPENSATED,
            ]);
            compensated.add(i);
          }
          return;
        }
        const ttlMs = kind === 4 ? 1000 : 20_000;
        const r = await retryUnavailable(() => p.client.reserveOrder({ requestId: id, userId: user(i), items, ttlMs }));
        if (r.outcome !== OrderOutcome.RESERVED) return;
        if (kind === 2 || kind === 5) {
          const cs = await Promise.all([conf(p, id), conf(q, id)]);
          expect(
            cs.map((c) => c.outcome),
            `order ${i}`,
          ).toEqual([ConfirmOutcome.CONFIRMED, ConfirmOutcome.CONFIRMED]);
          if (kind === 5) {
            await sleep(Math.random() * 200);
            const c = await cmp(q, id);
            expect(c.outcome, `order ${i}`).toBe(CompensateOutcome.COMPENSATED);
            compensated.add(i);
          }
        } else if (kind === 3) {
          const [c, l] = await Promise.all([conf(p, id), rel(q, id)]);
          const confirmedWon = c.outcome === ConfirmOutcome.CONFIRMED;
          expect([c.outcome, l.outcome], `order ${i}`).toEqual(
            confirmedWon ? [ConfirmOutcome.CONFIRMED, ReleaseOutcome.CONFIRMED] : [ConfirmOutcome.RELEASED, ReleaseOutcome.RELEASED],
          );
        } else {
          // kind 4: left to expire; a confirm racing the expiry from the other instance either wins whole or not at all.
          await sleep(900 + Math.random() * 300);
          await conf(q, id).catch(() => null);
        }
      }),
    );
    await waitFor(
      'no units held',
      () => Promise.all(ids.map((c) => a.client.getStock({ couponId: c }))),
      (ls) => ls.every((l) => l.level?.held === 0n),
      20_000,
      100,
    );

    // Every order's final answer, asked twice from each instance: stable, and DEDUCTED exactly when whole.
    const finals = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const id = orderId(i);
        const kind = i % 6;
        const call = (t: TestApp): Promise<{ outcome: OrderOutcome }> =>
          retryUnavailable<{ outcome: OrderOutcome }>(() =>
            kind <= 1
              ? t.client.deductOrder({ requestId: id, userId: user(i), items })
              : t.client.reserveOrder({ requestId: id, userId: user(i), items, ttlMs: kind === 4 ? 1000 : 20_000 }),
          );
        const rs = [await call(a), await call(b), await call(b), await call(a)];
        expect(new Set(rs.map((r) => r.outcome)).size, `order ${i}: ${rs.map((r) => OrderOutcome[r.outcome])}`).toBe(1);
        return rs[0]!.outcome;
      }),
    );
    let whole = 0;
    let everTaken = 0;
    const net = new Map<string, number>();
    for (const id of ids) {
      expect((await settled(a.client, id)).consistent, `coupon ${id} consistent`).toBe(true);
      const rows = await a.app.orm.em
        .fork()
        .execute<{ request_id: string; kind: string }[]>('select request_id, kind from stock_ledger where coupon_id = ?', [id]);
      const seen = new Set<string>();
      for (const r of rows) {
        if (r.kind === 'DEDUCT' || r.kind === 'COMPENSATE') {
          const k = `${r.kind}|${r.request_id}`;
          expect(seen.has(k), `${id} ${k} twice`).toBe(false);
          seen.add(k);
          net.set(`${id}|${r.request_id}`, (net.get(`${id}|${r.request_id}`) ?? 0) + (r.kind === 'DEDUCT' ? 1 : -1));
        }
      }
    }
    for (let i = 0; i < N; i++) {
      const items = ids.map((c, k) => net.get(`${c}|${orderItemRequestId(orderId(i), k)}`));
      const takenNow = items.filter((x) => x === 1).length;
      const rows = items.filter((x) => x !== undefined).length;
      expect(takenNow === 0 || takenNow === 3, `order ${i}: ${items.join(',')}`).toBe(true);
      expect(rows === 0 || rows === 3, `order ${i} rows: ${items.join(',')}`).toBe(true);
      expect(TAKEN.has(finals[i]!), `order ${i}: ${OrderOutcome[finals[i]!]} vs ${items.join(',')}`).toBe(takenNow === 3);
      expect(finals[i] === OrderOutcome.COMPENSATED, `order ${i} compensated`).toBe(compensated.has(i));
      if (takenNow === 3) whole++;
      if (rows === 3) everTaken++;
    }
    expect(whole).toBeGreaterThan(0);
    expect(compensated.size).toBeGreaterThan(0);
    for (const [k, id] of ids.entries()) {
      const f = await ledgerFigures(a.app, id);
      expect([f.deductRows, f.compensateRows, f.remaining, f.duplicates], `coupon ${k}`).toEqual([
        everTaken,
        everTaken - whole,
        stocks[k]! - whole * qty[k]!,
        0,
      ]);
      const l = (await b.client.getStock({ couponId: id })).level!;
      expect([l.available, l.held, l.deducted], `coupon ${k}`).toEqual([BigInt(stocks[k]! - whole * qty[k]!), 0n, BigInt(whole * qty[k]!)]);
    }
  });
});
