// OrderService and OrderSweeper over in-memory holds and order records (test/support/fakes/order-holds.ts):
// the all-or-nothing protocol of docs/orders.md, including crashes at each step, without the stack.
import { describe, expect, it } from 'vitest';
import { orderItemRequestId } from '../../src/domain/ids.js';
import type { Coupon } from '../../src/domain/ports.js';
import { OrderService, type OrderSettings } from '../../src/domain/orders.js';
import { OrderSweeper } from '../../src/domain/order-sweeper.js';
import { FakeOrderHolds, FakeOrderRecords } from '../support/fakes/order-holds.js';

const SETTINGS: OrderSettings = {
  maxItems: 8,
  maxQuantity: 100,
  ttl: { minMs: 1000, maxMs: 600_000, defaultMs: 30_000 },
  commitMarginMs: 2000,
  finishAfterMs: 1000,
  graceMs: 500,
  abandonAfterMs: 10_000,
};

function setup(stock: Record<string, number>, limits: Record<string, number> = {}) {
  let now = 1_000_000;
  const clock = { advance: (ms: number) => (now += ms), now: () => now };
  const holds = new FakeOrderHolds(clock.now);
  for (const [id, units] of Object.entries(stock)) holds.stock(id, units, limits[id] ?? 0);
  const records = new FakeOrderRecords();
  const errors: { what: string; err: unknown }[] = [];
  const coupon = async (id: string) => {
    if (!holds.available.has(id)) throw Object.assign(new Error(`coupon ${id} not found`), { kind: 'not_found' });
    return { id, perUserLimit: limits[id] ?? 0 } as Coupon;
  };
  const orders = new OrderService({
    holds,
    records,
    coupon,
    settings: SETTINGS,
    now: clock.now,
    onError: (what, err) => errors.push({ what, err }),
  });
  const sweeper = new OrderSweeper(orders, records, (what, err) => errors.push({ what, err }), clock.now);
  /** available + held + deducted per coupon: conserved whatever happens. */
  const units = (id: string) => ({ available: holds.available.get(id)!, held: holds.held(id), deducted: holds.deducted.get(id)! });
  return { clock, holds, records, orders, sweeper, errors, units };
}

/** Items as { couponId: quantity }, in order; as [couponId, quantity] pairs where a case lists a coupon twice. */
const order = (requestId: string, items: Record<string, number> | [string, number][], userId = 'u1', ttlMs = 0) => ({
  requestId,
  userId,
  items: (Array.isArray(items) ? items : Object.entries(items)).map(([couponId, q]) => ({ couponId, quantity: BigInt(q) })),
  ttlMs,
});

describe('OrderService over fakes', () => {
  it('when every item is available, then DeductOrder confirms them all, and a retry answers the same without taking more', async () => {
    const t = setup({ a: 10, b: 10, c: 10 });
    const r = await t.orders.deductOrder(order('o1', { a: 2, b: 1, c: 3 }));
    expect(r).toMatchObject({ orderId: 'o1', outcome: 'confirmed', replayed: false });
    expect(r.items.map((i) => i.requestId)).toEqual(['o1:0', 'o1:1', 'o1:2']);
    expect([t.units('a'), t.units('b'), t.units('c')]).toEqual([
      { available: 8, held: 0, deducted: 2 },
      { available: 9, held: 0, deducted: 1 },
      { available: 7, held: 0, deducted: 3 },
    ]);
    const again = await t.orders.deductOrder(order('o1', { a: 2, b: 1, c: 3 }));
    expect(again).toMatchObject({ outcome: 'confirmed', replayed: true });
    expect(t.units('a').deducted + t.units('b').deducted + t.units('c').deducted).toBe(6);
    expect(t.records.dueAt.has('o1')).toBe(false);
  });

  it('when one item is sold out, then nothing is taken, the answer names that item, and a retry gives the same refusal', async () => {
    const t = setup({ a: 10, b: 0, c: 10 });
    const r = await t.orders.deductOrder(order('o1', { a: 2, b: 1, c: 3 }));
    expect(r).toMatchObject({ outcome: 'refused', refused: { index: 1, couponId: 'b', reason: 'sold_out' } });
    expect([t.units('a'), t.units('c')]).toEqual([
      { available: 10, held: 0, deducted: 0 },
      { available: 10, held: 0, deducted: 0 },
    ]);
    // Stock comes back: the refused order stays refused (its decision is recorded), nothing is taken.
    t.holds.available.set('b', 5);
    expect(await t.orders.deductOrder(order('o1', { a: 2, b: 1, c: 3 }))).toMatchObject({
      outcome: 'refused',
      replayed: true,
      refused: { index: 1, reason: 'sold_out' },
    });
    expect(t.units('b').available).toBe(5);
  });

  it('when an item asks more than is left or passes the per-user limit, then the refusal says insufficient or user_limit_exceeded', async () => {
    const t = setup({ a: 10, b: 1, l: 10 }, { l: 2 });
    expect((await t.orders.deductOrder(order('o1', { a: 1, b: 2 }))).refused).toEqual({ index: 1, couponId: 'b', reason: 'insufficient' });
    expect((await t.orders.deductOrder(order('o2', { l: 2, a: 1 }))).outcome).toBe('confirmed');
    expect((await t.orders.deductOrder(order('o3', { a: 1, l: 1 }))).refused).toEqual({
      index: 1,
      couponId: 'l',
      reason: 'user_limit_exceeded',
    });
    expect(t.units('a')).toEqual({ available: 9, held: 0, deducted: 1 });
  });

  it('when ReserveOrder holds every item, then Confirm on the order deducts them all, and Release afterwards changes nothing', async () => {
    const t = setup({ a: 5, b: 5 });
    const r = await t.orders.reserveOrder(order('o1', { a: 1, b: 2 }, 'u1', 60_000));
    expect(r).toMatchObject({ outcome: 'held', expiresAtMs: t.clock.now() + 60_000 });
    expect(r.items.map((i) => i.hold?.holdId)).toEqual(['a/0/o1:0', 'b/0/o1:1']);
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 4, held: 1, deducted: 0 },
      { available: 3, held: 2, deducted: 0 },
    ]);
    expect(await t.orders.reserveOrder(order('o1', { a: 1, b: 2 }, 'u1', 60_000))).toMatchObject({ outcome: 'held', replayed: true });
    t.clock.advance(30_000);
    expect(await t.orders.confirmOrder('o1')).toMatchObject({ outcome: 'confirmed' });
    expect(await t.orders.releaseOrder('o1', 'too late')).toMatchObject({ outcome: 'confirmed', replayed: true });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 4, held: 0, deducted: 1 },
      { available: 3, held: 0, deducted: 2 },
    ]);
  });

  it('when a reserved order is released, then every hold gives its units back and a later Confirm answers released', async () => {
    const t = setup({ a: 5, b: 5 });
    await t.orders.reserveOrder(order('o1', { a: 1, b: 2 }));
    expect(await t.orders.releaseOrder('o1', 'payment failed')).toMatchObject({ outcome: 'released' });
    expect(await t.orders.confirmOrder('o1')).toMatchObject({ outcome: 'released', replayed: true });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
  });

  it('when a reserved order is confirmed within the commit margin of its expiry, then its holds are extended first; once expired, it answers expired and takes nothing', async () => {
    const t = setup({ a: 5, b: 5 });
    await t.orders.reserveOrder(order('o1', { a: 1, b: 1 }, 'u1', 10_000));
    t.clock.advance(9_000);
    expect(await t.orders.confirmOrder('o1')).toMatchObject({ outcome: 'confirmed' });
    await t.orders.reserveOrder(order('o2', { a: 1, b: 1 }, 'u1', 10_000));
    t.clock.advance(10_000);
    expect(await t.orders.confirmOrder('o2')).toMatchObject({ outcome: 'expired' });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 4, held: 0, deducted: 1 },
      { available: 4, held: 0, deducted: 1 },
    ]);
  });

  it('when a reserved order is extended, then the sweeper leaves it until its new expiry, then records it expired and nothing is taken', async () => {
    const t = setup({ a: 5, b: 5 });
    await t.orders.reserveOrder(order('o1', { a: 1, b: 1 }, 'u1', 10_000));
    t.clock.advance(8_000);
    expect(await t.orders.extendOrder('o1', 20_000)).toMatchObject({ outcome: 'held', expiresAtMs: t.clock.now() + 20_000 });
    t.clock.advance(10_000);
    expect(await t.sweeper.sweep()).toBe(0);
    expect([t.units('a').held, t.units('b').held]).toEqual([1, 1]);
    t.clock.advance(10_000 + SETTINGS.graceMs);
    expect(await t.sweeper.sweep()).toBe(1);
    expect(await t.orders.confirmOrder('o1')).toMatchObject({ outcome: 'expired', replayed: true });
    expect(await t.orders.extendOrder('o1', 20_000)).toMatchObject({ outcome: 'expired' });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
  });

  it('when the call dies while taking holds, then a retry takes the same holds (never twice) and finishes the order', async () => {
    const t = setup({ a: 5, b: 5, c: 5 });
    t.holds.failNext('reserve', 'o1:2');
    await expect(t.orders.deductOrder(order('o1', { a: 1, b: 1, c: 1 }))).rejects.toThrow(/injected reserve/);
    expect((await t.records.read('o1'))?.state).toBe('pending');
    expect([t.units('a').held, t.units('b').held, t.units('c').held]).toEqual([1, 1, 0]);
    // The retry decides (the dead call never did): not a replay.
    expect(await t.orders.deductOrder(order('o1', { a: 1, b: 1, c: 1 }))).toMatchObject({ outcome: 'confirmed', replayed: false });
    for (const c of ['a', 'b', 'c']) expect(t.units(c)).toEqual({ available: 4, held: 0, deducted: 1 });
  });

  it('when the call dies while taking holds and nobody retries, then the holds expire, the sweeper aborts the order, and a late retry takes nothing', async () => {
    const t = setup({ a: 5, b: 5 });
    t.holds.failNext('reserve', 'o1:1');
    await expect(t.orders.deductOrder(order('o1', { a: 2, b: 1 }, 'u1', 5_000))).rejects.toThrow();
    expect(await t.sweeper.sweep()).toBe(0);
    t.clock.advance(5_000 + SETTINGS.graceMs);
    expect(await t.sweeper.sweep()).toBe(1);
    expect(t.sweeper.stats.ended.abandoned).toBe(1);
    expect((await t.records.read('o1'))?.state).toBe('aborted');
    expect(await t.orders.deductOrder(order('o1', { a: 2, b: 1 }, 'u1', 5_000))).toMatchObject({ outcome: 'abandoned', replayed: true });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
  });

  it('when the call dies while taking long holds, then the sweeper abandons the order after the abandon time and releases them before they expire', async () => {
    const t = setup({ a: 5, b: 5 });
    t.holds.failNext('reserve', 'o1:1');
    await expect(t.orders.deductOrder(order('o1', { a: 2, b: 1 }, 'u1', 600_000))).rejects.toThrow();
    expect(t.units('a').held).toBe(2);
    t.clock.advance(SETTINGS.abandonAfterMs - 1);
    expect(await t.sweeper.sweep()).toBe(0);
    t.clock.advance(1 + SETTINGS.graceMs);
    expect(await t.sweeper.sweep()).toBe(1);
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
    expect(await t.orders.deductOrder(order('o1', { a: 2, b: 1 }, 'u1', 600_000))).toMatchObject({ outcome: 'abandoned', replayed: true });
  });

  it('when a retry comes after the holds of an unfinished order expired, then the order is aborted as expired and nothing is taken', async () => {
    const t = setup({ a: 5, b: 5 });
    t.holds.failNext('reserve', 'o1:1');
    await expect(t.orders.deductOrder(order('o1', { a: 2, b: 1 }, 'u1', 5_000))).rejects.toThrow();
    t.clock.advance(5_000);
    expect(await t.orders.deductOrder(order('o1', { a: 2, b: 1 }, 'u1', 5_000))).toMatchObject({ outcome: 'expired' });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
  });

  it('when the call dies after the commit with some items confirmed, then the sweeper confirms the rest before the holds expire', async () => {
    const t = setup({ a: 5, b: 5, c: 5 });
    t.holds.failNext('confirm', 'o1:1');
    await expect(t.orders.deductOrder(order('o1', { a: 1, b: 1, c: 1 }, 'u1', 4_000))).rejects.toThrow(/injected confirm/);
    expect((await t.records.read('o1'))?.state).toBe('committed');
    expect([t.units('a').deducted, t.units('b').deducted, t.units('c').deducted]).toEqual([1, 0, 1]);
    t.clock.advance(SETTINGS.finishAfterMs);
    expect(await t.sweeper.sweep()).toBe(1);
    t.clock.advance(60_000);
    for (const c of ['a', 'b', 'c']) expect(t.units(c)).toEqual({ available: 4, held: 0, deducted: 1 });
    expect(await t.orders.deductOrder(order('o1', { a: 1, b: 1, c: 1 }, 'u1', 4_000))).toMatchObject({
      outcome: 'confirmed',
      replayed: true,
    });
    expect(t.errors).toEqual([]);
  });

  it('when a stall outlasts the commit margin and a hold expires before its confirm, then the confirmed items are given back and the order ends expired', async () => {
    const t = setup({ a: 5, b: 5, c: 5 });
    t.holds.failNext('confirm', 'o1:2');
    await expect(t.orders.deductOrder(order('o1', { a: 1, b: 1, c: 1 }, 'u1', 4_000))).rejects.toThrow(/injected confirm/);
    expect([t.units('a').deducted, t.units('b').deducted, t.units('c').deducted]).toEqual([1, 1, 0]);
    // Nobody finishes it in time: item c's hold expires (the sweeper stalled past the margin).
    t.clock.advance(60_000);
    expect(await t.sweeper.sweep()).toBe(1);
    for (const c of ['a', 'b', 'c']) expect(t.units(c)).toEqual({ available: 5, held: 0, deducted: 0 });
    expect(await t.orders.deductOrder(order('o1', { a: 1, b: 1, c: 1 }, 'u1', 4_000))).toMatchObject({
      outcome: 'expired',
      replayed: true,
    });
    expect(t.errors.map((e) => e.what)).toEqual(['order confirm']);
    expect([t.orders.stats.undoneCommits, t.sweeper.stats.ended.finished]).toEqual([1, 1]);
  });

  it('when an order record is lost after its commit (a Redis node lost with it), then a retry follows the commit: it confirms the rest, or gives the confirmed items back when the rest expired', async () => {
    const t = setup({ a: 5, b: 5, c: 5 });
    const items = { a: 1, b: 1, c: 1 };
    t.holds.failNext('confirm', 'o1:2');
    await expect(t.orders.deductOrder(order('o1', items, 'u1', 60_000))).rejects.toThrow(/injected confirm/);
    t.records.records.delete('o1');
    expect(await t.orders.deductOrder(order('o1', items, 'u1', 60_000))).toMatchObject({ outcome: 'confirmed' });
    for (const c of ['a', 'b', 'c']) expect(t.units(c)).toEqual({ available: 4, held: 0, deducted: 1 });

    t.holds.failNext('confirm', 'o2:0');
    await expect(t.orders.deductOrder(order('o2', items, 'u1', 4_000))).rejects.toThrow(/injected confirm/);
    t.records.records.delete('o2');
    t.clock.advance(60_000);
    expect(await t.orders.deductOrder(order('o2', items, 'u1', 4_000))).toMatchObject({ outcome: 'expired' });
    for (const c of ['a', 'b', 'c']) expect(t.units(c)).toEqual({ available: 4, held: 0, deducted: 1 });
  });

  it('when the holds of a DeductOrder would expire within the commit margin, then they are extended before the commit', async () => {
    const t = setup({ a: 5, b: 5 });
    // TTL 1 s is below margin + finish delay: the coordinator extends before committing.
    const r = await t.orders.deductOrder(order('o1', { a: 1, b: 1 }, 'u1', 1_000));
    expect(r.outcome).toBe('confirmed');
    expect(t.errors).toEqual([]);
  });

  it('when a confirmed order is compensated, then every item comes back once', async () => {
    const t = setup({ a: 5, b: 5 });
    await t.orders.deductOrder(order('o1', { a: 2, b: 1 }));
    expect(await t.orders.compensateOrder('o1', 'refund')).toMatchObject({ outcome: 'compensated', already: false });
    expect(await t.orders.compensateOrder('o1', 'refund')).toMatchObject({ outcome: 'compensated', already: true });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
  });

  it('when the request is malformed or reused with other items, then INVALID_ARGUMENT names the field or FAILED_PRECONDITION, and nothing is taken', async () => {
    const t = setup({ a: 5, b: 5 }, { b: 1 });
    await expect(t.orders.deductOrder(order('o1', []))).rejects.toMatchObject({ kind: 'invalid_argument', message: /^items:/ });
    await expect(
      t.orders.deductOrder(
        order('o1', [
          ['a', 1],
          ['a', 1],
        ]),
      ),
    ).rejects.toMatchObject({ message: /^items\[1\]\.coupon_id: repeats/ });
    await expect(t.orders.deductOrder(order('o1', { a: 101 }))).rejects.toMatchObject({ message: /^items\[0\]\.quantity/ });
    await expect(t.orders.deductOrder(order('o1', { 'bad id': 1 }))).rejects.toMatchObject({ message: /^items\[0\]\.coupon_id/ });
    await expect(t.orders.deductOrder(order('o1', { a: 1, b: 1 }, ''))).rejects.toMatchObject({ message: /^user_id: is required/ });
    await expect(t.orders.deductOrder(order('o1', { a: 1 }, 'u1', 10))).rejects.toMatchObject({ message: /^ttl_ms/ });
    await expect(t.orders.deductOrder(order('o1', { a: 1, zz: 1 }))).rejects.toThrow(/zz not found/);
    expect(t.holds.calls).toBe(0);
    await t.orders.deductOrder(order('o1', { a: 1 }));
    await expect(t.orders.deductOrder(order('o1', { a: 2 }))).rejects.toMatchObject({
      kind: 'failed_precondition',
      message: /different items/,
    });
    await expect(t.orders.reserveOrder(order('o1', { a: 1 }))).rejects.toMatchObject({
      kind: 'failed_precondition',
      message: /order kind/,
    });
    await expect(t.orders.confirmOrder('nope')).rejects.toMatchObject({ kind: 'not_found' });
    expect(t.units('a')).toEqual({ available: 4, held: 0, deducted: 1 });
  });

  it('when 300 orders of 3 coupons race and one coupon sells out midway, then no order is half taken and the units add up', async () => {
    const t = setup({ a: 1000, b: 100, c: 1000 });
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => t.orders.deductOrder(order(`o${i}`, { a: 1, b: 1, c: 2 }, `u${i}`))),
    );
    const confirmed = results.filter((r) => r.outcome === 'confirmed').length;
    expect(confirmed).toBe(100);
    expect(results.filter((r) => r.outcome === 'refused' && r.refused?.couponId === 'b').length).toBe(200);
    expect([t.units('a'), t.units('b'), t.units('c')]).toEqual([
      { available: 900, held: 0, deducted: 100 },
      { available: 0, held: 0, deducted: 100 },
      { available: 800, held: 0, deducted: 200 },
    ]);
    // Every confirmed order has all three items confirmed, every refused one none.
    for (const r of results) {
      const states = r.items.map((it) => t.holds.holds.get(`${it.couponId}/0/${orderItemRequestId(r.orderId, it.index)}`)?.state ?? 'none');
      if (r.outcome === 'confirmed') expect(states).toEqual(['confirmed', 'confirmed', 'confirmed']);
      else expect(states.every((s) => s === 'released' || s === 'none')).toBe(true);
    }
  });

  it('when the sweeper aborts a slow order while its call is still taking holds, then the call follows the abort and releases what it took', async () => {
    const t = setup({ a: 5, b: 5 });
    const slow = t.orders.deductOrder(order('o1', { a: 1, b: 1 }, 'u1', 1_000));
    // The sweeper decides first (as if the call had been stuck past its holds' lifetime).
    await t.records.open(
      {
        orderId: 'o1',
        kind: 'deduct',
        userId: 'u1',
        items: [
          { couponId: 'a', quantity: 1 },
          { couponId: 'b', quantity: 1 },
        ],
        ttlMs: 1_000,
      },
      t.clock.now(),
    );
    await t.records.move('o1', ['pending'], 'aborted', t.clock.now(), { set: { abort: 'abandoned' } });
    expect(await slow).toMatchObject({ outcome: 'abandoned', replayed: true });
    expect([t.units('a'), t.units('b')]).toEqual([
      { available: 5, held: 0, deducted: 0 },
      { available: 5, held: 0, deducted: 0 },
    ]);
  });
});
