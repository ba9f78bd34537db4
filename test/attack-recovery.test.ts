// Attack on the data-loss recovery with holds and orders open (docs/guarantees.md "When Redis loses data",
// docs/orders.md): one shard of a coupon loses everything (hash, holds, records, user counts, as with a
// flushed master) while reserved orders and single holds are open on it; then, at once, Deducts (which find
// the shard missing and trigger the recovery), Confirms of every order from two instances and of every single
// hold. After it: no lost hold is ever confirmed, every order is whole or empty, no unit counted twice, and
// Redis, MySQL and Reconcile agree to the unit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfirmOutcome, DeductOutcome, OrderOutcome, ReleaseOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { parseHoldId } from '../src/domain/holds.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { loseShard } from './support/inspect.js';
import { ledgerFigures, settled } from './support/settlement.js';

const ENV = { SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_HOLD_SWEEP_MS: '100' };
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp({ ...ENV, SHARDSTOCK_INSTANCE_ID: 'atk-rec-a' });
  b = await startTestApp({ ...ENV, SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_INSTANCE_ID: 'atk-rec-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

describe('attack: recovery with holds and orders open', () => {
  it('when a shard with open order items and holds is lost and Deducts, order Confirms and hold Confirms race the recovery, then lost holds are never confirmed, orders are whole or empty, and no unit is doubled', async () => {
    const [c, d] = [uniqueId('arc'), uniqueId('ard')];
    const TOTAL = 200;
    await a.client.createCoupon({ couponId: c, totalStock: BigInt(TOTAL), shardCount: 4 });
    await a.client.createCoupon({ couponId: d, totalStock: 100n, shardCount: 2 });
    const coupon = (await a.app.repo.find(c))!;
    // Settled deductions first (so nothing of them is in flight when the shard goes).
    const early = await Promise.all(
      Array.from({ length: 12 }, (_, i) => a.client.deduct({ couponId: c, requestId: `e${i}`, quantity: 1n })),
    );
    expect(early.every((r) => r.outcome === DeductOutcome.DEDUCTED)).toBe(true);
    await settled(a.client, c);
    const orders = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        a.client.reserveOrder({
          requestId: uniqueId(`ro${i}`),
          items: [
            { couponId: c, quantity: 2n },
            { couponId: d, quantity: 1n },
          ],
          ttlMs: 60_000,
        }),
      ),
    );
    expect(orders.map((o) => o.outcome)).toEqual(Array(16).fill(OrderOutcome.RESERVED));
    // The shard to lose: the one with most order items; 8 single holds there and 8 elsewhere.
    const perShard = [0, 1, 2, 3].map((s) => orders.filter((o) => parseHoldId(o.items[0]!.hold!.holdId).shard === s).length);
    const lost = perShard.indexOf(Math.max(...perShard));
    const lostHold = (holdId: string) => parseHoldId(holdId).shard === lost;
    const [onIds, offIds]: [string[], string[]] = [[], []];
    for (let i = 0; onIds.length < 8 || offIds.length < 8; i++) {
      const list = homeShard(coupon, `h${i}`, '') === lost ? onIds : offIds;
      if (list.length < 8) list.push(`h${i}`);
    }
    const holds = await Promise.all(
      [...onIds, ...offIds].map((requestId) => b.client.reserve({ couponId: c, requestId, quantity: 3n, ttlMs: 60_000 })),
    );
    expect(holds.filter((h) => lostHold(h.hold!.holdId)).length).toBe(8);

    // The shard loses everything.
    await loseShard(a.app, coupon, lost);

    const [fresh, orderAnswers, holdAnswers] = await Promise.all([
      Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).client.deduct({ couponId: c, requestId: `n${i}`, quantity: 1n }))),
      Promise.all(
        orders.map((o) =>
          Promise.all([a, b].map((t) => t.client.confirm({ target: { case: 'orderId', value: o.orderId } }))).then((rs) => ({ o, rs })),
        ),
      ),
      Promise.all(holds.map((h) => a.client.confirm({ target: { case: 'holdId', value: h.hold!.holdId } }).then((r) => ({ h, r })))),
    ]);
    const freshUnits = fresh.filter((r) => r.outcome === DeductOutcome.DEDUCTED).length;
    expect(freshUnits).toBe(40);

    // Single holds: on the lost shard never confirmed (NOT_FOUND), elsewhere confirmed.
    let holdUnits = 0;
    for (const { h, r } of holdAnswers) {
      if (lostHold(h.hold!.holdId)) expect(r.outcome, h.hold!.holdId).toBe(ConfirmOutcome.NOT_FOUND);
      else {
        expect(r.outcome, h.hold!.holdId).toBe(ConfirmOutcome.CONFIRMED);
        holdUnits += 3;
      }
    }
    // Orders: an order with its c item on the lost shard cannot be confirmed (its d item is released); the
    // others are confirmed. Both instances' answers agree.
    let [cOrderUnits, dOrderUnits] = [0, 0];
    for (const { o, rs } of orderAnswers) {
      const onLost = lostHold(o.items[0]!.hold!.holdId);
      expect(rs[0]!.outcome, o.orderId).toBe(rs[1]!.outcome);
      if (onLost) expect(rs[0]!.outcome, o.orderId).not.toBe(ConfirmOutcome.CONFIRMED);
      else {
        expect(rs[0]!.outcome, o.orderId).toBe(ConfirmOutcome.CONFIRMED);
        cOrderUnits += 2;
        dOrderUnits += 1;
      }
    }
    const lostOrders = orderAnswers.filter(({ o }) => lostHold(o.items[0]!.hold!.holdId)).length;
    expect(lostOrders).toBeGreaterThan(0);
    expect(lostOrders).toBeLessThan(16);
    // A second confirm of every lost hold still cannot confirm it.
    for (const { h } of holdAnswers.filter(({ h }) => lostHold(h.hold!.holdId)))
      expect((await b.client.confirm({ target: { case: 'holdId', value: h.hold!.holdId } })).outcome).toBe(ConfirmOutcome.NOT_FOUND);

    const taken = 12 + freshUnits + holdUnits + cOrderUnits;
    const lc = (await a.client.getStock({ couponId: c })).level!;
    const ld = (await a.client.getStock({ couponId: d })).level!;
    expect([lc.held, lc.deducted, lc.available]).toEqual([0n, BigInt(taken), BigInt(TOTAL - taken)]);
    expect([ld.held, ld.deducted, ld.available]).toEqual([0n, BigInt(dOrderUnits), BigInt(100 - dOrderUnits)]);
    const [rc, rd] = await Promise.all([settled(a.client, c), settled(a.client, d)]);
    const [fc, fd] = await Promise.all([ledgerFigures(a.app, c), ledgerFigures(a.app, d)]);
    expect([fc.deductUnits - fc.compensateUnits, fc.duplicates, fc.anomalies.length]).toEqual([taken, 0, 0]);
    expect([fd.deductUnits - fd.compensateUnits, fd.duplicates]).toEqual([dOrderUnits, 0]);
    expect([rc.consistent, rc.redisDrift, rc.redisAvailable, rd.consistent, rd.redisDrift]).toEqual([
      true,
      0n,
      BigInt(TOTAL - taken),
      true,
      0n,
    ]);
  }, 50_000);
});

describe('attack: per-user counts across a rebuild', () => {
  it('when only a shard hash is lost while users hold units there, then after the rebuild those stale holds no longer count toward the users limits: each user can take exactly the limit', async () => {
    const c = uniqueId('aru');
    const LIMIT = 3;
    await a.client.createCoupon({ couponId: c, totalStock: 60n, shardCount: 2, perUserLimit: LIMIT });
    const coupon = (await a.app.repo.find(c))!;
    // Users on shard 0: one with only a hold, one with a settled deduction and a hold.
    const users: string[] = [];
    for (let i = 0; users.length < 2; i++) if (homeShard(coupon, '', `ru${i}`) === 0) users.push(`ru${i}`);
    const [holder, mixed] = users as [string, string];
    expect((await a.client.reserve({ couponId: c, requestId: 'hold-only', userId: holder, quantity: 2n, ttlMs: 60_000 })).outcome).toBe(1);
    expect((await a.client.deduct({ couponId: c, requestId: 'mixed-d', userId: mixed, quantity: 1n })).outcome).toBe(
      DeductOutcome.DEDUCTED,
    );
    expect((await a.client.reserve({ couponId: c, requestId: 'mixed-h', userId: mixed, quantity: 2n, ttlMs: 60_000 })).outcome).toBe(1);
    await settled(a.client, c);
    // The shard's hash alone goes (its records, holds and user counts survive).
    await a.app.redis.del(a.app.store.keys(shardRef(coupon, 0)).shard);
    const rec = await a.client.reconcile({ couponId: c, repair: true });
    expect(rec.repair!.rebuiltShards).toEqual([0]);
    expect([rec.consistent, rec.redisAvailable, rec.redisHeld]).toEqual([true, 59n, 0n]);
    // The stale holds end without giving anything back (the rebuild did)...
    for (const h of ['hold-only', 'mixed-h']) {
      const r = await b.client.release({ target: { case: 'holdId', value: `${c}/0/${h}` } });
      expect([r.outcome, r.released], h).toEqual([ReleaseOutcome.EXPIRED, 0n]);
    }
    // ...and no longer count for their users: the holder can take the whole limit, the other the limit minus
    // its deduction; one more is refused.
    expect((await a.client.deduct({ couponId: c, requestId: 'h-fill', userId: holder, quantity: BigInt(LIMIT) })).outcome).toBe(
      DeductOutcome.DEDUCTED,
    );
    expect((await a.client.deduct({ couponId: c, requestId: 'm-fill', userId: mixed, quantity: BigInt(LIMIT - 1) })).outcome).toBe(
      DeductOutcome.DEDUCTED,
    );
    for (const u of users)
      expect((await b.client.deduct({ couponId: c, requestId: `${u}-over`, userId: u, quantity: 1n })).outcome, u).toBe(
        DeductOutcome.USER_LIMIT_EXCEEDED,
      );
    const done = await settled(a.client, c);
    expect([done.consistent, done.redisDrift, done.ledgerDeducted]).toEqual([true, 0n, BigInt(2 * LIMIT)]);
  });
});
