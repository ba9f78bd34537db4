// A Deduct that its home shard cannot cover probes every shard to plan a fallback. The probe's reads are not one
// snapshot: a move made by another caller between them, credited at a shard read before it landed and
// acknowledged at a shard read after it left, is seen nowhere. A sell-out was declared only on a second probe
// that agreed, but INSUFFICIENT (and a partial fill's shrink) rested on the first probe alone, so a caller was
// told the coupon lacked units it had.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moveCreditId } from '../src/domain/ids.js';
import { shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { requestIdHomedAt } from './support/routing.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await a?.close();
});

/** Holds a probe read of shard `heldTag` (an HMGET of its hash; the one after `skip` others) before it is sent,
 * until released, and reports when the same probe's read of shard `firstTag` has been answered: the test moves
 * units in between. */
function orderProbeReads(app: TestApp, firstTag: string, heldTag: string, skip = 0) {
  const redis = app.app.redis as unknown as { hmget: (...args: unknown[]) => Promise<unknown> };
  const original = redis.hmget;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let firstAnswered!: () => void;
  const first = new Promise<void>((r) => (firstAnswered = r));
  let heldSeen = 0;
  let firstSeen = 0;
  redis.hmget = async (...args: unknown[]) => {
    const key = String(args[0]);
    if (key.includes(`{${heldTag}}`) && heldSeen++ === skip) {
      await gate;
      redis.hmget = original;
      return original.apply(app.app.redis, args);
    }
    const r = await original.apply(app.app.redis, args);
    if (key.includes(`{${firstTag}}`) && firstSeen++ === skip) firstAnswered();
    return r;
  };
  return { first, release };
}

describe('INSUFFICIENT against a move between the probe reads', () => {
  for (const partial of [false, true]) {
    it(`when another caller's move lands between the probe's reads of its two shards, then a ${partial ? 'partial fill still gets every unit it asked for' : 'Deduct still gets its units, not INSUFFICIENT'}`, async () => {
      const id = uniqueId('im');
      await a.client.createCoupon({ couponId: id, totalStock: 3n, shardCount: 3 });
      const coupon = (await a.app.repo.find(id))!;
      // One unit per shard; the home's is sold, so the request needs both others.
      const drain = await a.app.deduct.deduct({ couponId: id, requestId: requestIdHomedAt(coupon, 0, 'drain'), userId: '', quantity: 1n });
      expect(drain).toMatchObject({ outcome: 'deducted', shard: 0 });

      // The move another caller makes: shard 2's unit to shard 1, credited and acknowledged while the
      // probe has read shard 1 (one unit) and not yet shard 2.
      const order = orderProbeReads(a, coupon.shardTags[1]!, coupon.shardTags[2]!);
      const call = a.app.deduct.deduct({
        couponId: id,
        requestId: requestIdHomedAt(coupon, 0, 'want2'),
        userId: '',
        quantity: 2n,
        allowPartial: partial,
      });
      await order.first;
      const moveId = `m-${id}`;
      expect(await a.app.store.moveOut(shardRef(coupon, 2), moveId, 1, 1)).toBe(1);
      expect(await a.app.store.credit(shardRef(coupon, 1), moveCreditId(moveId), 1)).toBe('applied');
      expect(await a.app.store.ackMove(shardRef(coupon, 2), moveId)).toBe(true);
      order.release();

      const r = await call;
      expect(r).toMatchObject({ outcome: 'deducted', granted: 2, replayed: false });
      const levels = await a.app.store.probe([0, 1, 2].map((i) => shardRef(coupon, i)));
      expect(levels.map((l) => [l.available, l.inTransit])).toEqual([
        [0, 0],
        [0, 0],
        [0, 0],
      ]);
    });
  }

  it('when a probe that falls short is followed by one that a move hides everything from, then the coupon is not declared sold out', async () => {
    const id = uniqueId('im');
    await a.client.createCoupon({ couponId: id, totalStock: 3n, shardCount: 3 });
    const coupon = (await a.app.repo.find(id))!;
    // Only shard 1's unit is left.
    for (const shard of [0, 2]) {
      const r = await a.app.deduct.deduct({
        couponId: id,
        requestId: requestIdHomedAt(coupon, shard, `drain${shard}`),
        userId: '',
        quantity: 1n,
      });
      expect(r).toMatchObject({ outcome: 'deducted', shard });
    }

    // The first probe sees the unit (short of 2); in the second, shard 2 is read before the unit lands there
    // and shard 1 after it left: that probe sees nothing anywhere.
    const order = orderProbeReads(a, coupon.shardTags[2]!, coupon.shardTags[1]!, 1);
    const call = a.app.deduct.deduct({ couponId: id, requestId: requestIdHomedAt(coupon, 0, 'want2'), userId: '', quantity: 2n });
    await order.first;
    const moveId = `m-${id}`;
    expect(await a.app.store.moveOut(shardRef(coupon, 1), moveId, 2, 1)).toBe(1);
    expect(await a.app.store.credit(shardRef(coupon, 2), moveCreditId(moveId), 1)).toBe('applied');
    expect(await a.app.store.ackMove(shardRef(coupon, 1), moveId)).toBe(true);
    order.release();

    // One unit is left and 2 were asked for: INSUFFICIENT, never SOLD_OUT (which would also refuse the unit
    // from memory to every caller after it).
    expect((await call).outcome).toBe('insufficient');
    const next = await a.app.deduct.deduct({ couponId: id, requestId: 'want1', userId: '', quantity: 1n });
    expect(next.outcome).toBe('deducted');
  });
});
