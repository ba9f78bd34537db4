// The hold sweeper finds due holds through an index; its backstop (the full pass) re-adds shards whose entry a
// crash lost. It used to look only at the coupons this instance had served (the catalog's in-memory list), so
// when the instance that made the holds was gone, a fresh instance that no call had brought the coupon to
// never gave them back: 20 units stayed held long after expiry (found in review). The pass now also walks every
// coupon in MySQL, a page per pass (src/domain/coupon-walk.ts).
import { afterAll, describe, expect, it } from 'vitest';
import { shardRef } from '../src/domain/routing.js';
import { ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { HOLD_INDEX_PARTS, holdIndexKey } from '../src/redis/keys.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { waitFor } from './support/settlement.js';

const ENV = { SHARDSTOCK_HOLD_TTL_MIN_MS: '100', SHARDSTOCK_HOLD_SWEEP_MS: '100', SHARDSTOCK_HOLD_FULL_PASS_MS: '300' };
const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
});

async function sums(t: TestApp, couponId: string) {
  const coupon = (await t.app.repo.find(couponId))!;
  let [available, held, holds] = [0, 0, 0];
  for (let i = 0; i < coupon.shardCount; i++) {
    const keys = t.app.store.keys(shardRef(coupon, i));
    const [a, h] = await t.app.redis.hmget(keys.shard, 'avail', 'held');
    available += Number(a ?? 0);
    held += Number(h ?? 0);
    holds += await t.app.redis.zcard(keys.holds);
  }
  return { available, held, holds };
}

describe('holds whose index entries were lost with the instance that made them', () => {
  it('when a fresh instance never served the coupon, then its full pass still finds them and gives them back', async () => {
    const one = await startTestApp({ ...ENV, SHARDSTOCK_INSTANCE_ID: 'hil-1' });
    const couponId = uniqueId('hil');
    await one.client.createCoupon({ couponId, totalStock: 50n, shardCount: 4 });
    for (let i = 0; i < 10; i++) {
      const r = await one.client.reserve({ couponId, requestId: `${couponId}-h${i}`, quantity: 2n, ttlMs: 500 });
      expect(r.outcome).toBe(ReserveOutcome.HELD);
    }
    for (let p = 0; p < HOLD_INDEX_PARTS; p++) await one.app.redis.del(holdIndexKey(one.namespace, p));
    const namespace = one.namespace;
    await one.close();

    const two = await startTestApp({ ...ENV, SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'hil-2' });
    apps.push(two);
    const after = await waitFor(
      'the holds given back',
      () => sums(two, couponId),
      (s) => s.held === 0,
      15_000,
    );
    expect(after).toEqual({ available: 50, held: 0, holds: 0 });
    expect(two.app.holdSweeper.stats.expiredHolds).toBe(10);
  });
});
