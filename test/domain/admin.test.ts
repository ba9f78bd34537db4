// CouponAdmin over in-memory fakes (test/support/fakes): restocks, including those a crash left half done.
import { describe, expect, it } from 'vitest';
import { fakeDomain } from '../support/fakes/index.js';

describe('CouponAdmin over fakes', () => {
  it('when a coupon is created, then its stock is split evenly over its shards and it is marked preheated', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 10, 3);
    expect(c.shardTags).toHaveLength(3);
    expect(d.units(c)).toEqual({ avail: 10, transit: 0, net: 0, sum: 10 });
    expect(d.repo.coupons.get('c1')!.preheated).toBe(true);
  });

  it('when a restock is retried, then each shard gets its share once', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 0, 3);
    const first = await d.admin.restock({ couponId: 'c1', requestId: 's1', quantity: 7n });
    const again = await d.admin.restock({ couponId: 'c1', requestId: 's1', quantity: 7n });
    expect([first.replayed, again.replayed]).toEqual([false, true]);
    expect(d.units(c).sum).toBe(7);
    expect(first.level.available).toBe(7);
  });

  it('when a crash left a restock committed but not on the shards, then finishRestocks credits it once', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 3, 3);
    await d.repo.restock('c1', 's1', 5); // MySQL has it; the process died before crediting the shards
    expect(d.units(c).sum).toBe(3);
    await d.admin.finishRestocks(0);
    expect(d.units(c).sum).toBe(8);
    expect(await d.repo.unappliedRestocks(0)).toEqual([]);
    await d.admin.finishRestocks(0);
    expect(d.units(c).sum).toBe(8);
  });

  it('when a restock is younger than the grace, then finishRestocks leaves it to its own call', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 3, 3);
    await d.repo.restock('c1', 's1', 5);
    await d.admin.finishRestocks(60_000);
    expect(d.units(c).sum).toBe(3);
  });
});
