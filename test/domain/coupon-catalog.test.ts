// The catalog's background re-read of sale settings with many coupons served: the due coupons are read
// together (a few queries, not one per coupon), and a sale change whose announcement was lost still heals.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CouponCatalog } from '../../src/domain/coupon-catalog.js';
import { FakeCouponRepository } from '../support/fakes/coupon-repository.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('CouponCatalog sale refresh', () => {
  it('when 1,200 served coupons fall due for their sale re-read, then they are read in 3 queries and a missed pause is applied', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const repo = new FakeCouponRepository();
    const catalog = new CouponCatalog(repo);
    const ids = Array.from({ length: 1200 }, (_, i) => `c${i}`);
    for (const id of ids) {
      await repo.create({ id, initialStock: 10, shardCount: 1, perUserLimit: 0, shardTags: [`${id}#0.0`] });
      repo.coupons.get(id)!.sale = { startsAt: null, endsAt: null, paused: false, revision: 0 };
      await catalog.get(id);
    }
    const findsAfterLoad = repo.finds;
    // Another instance paused one coupon; its announcement never arrived here.
    repo.coupons.get('c777')!.sale = { startsAt: null, endsAt: null, paused: true, revision: 1 };

    vi.advanceTimersByTime(6000);
    for (const id of ids) await catalog.get(id); // every coupon is served again: each is due
    expect((await catalog.get('c777')).sale?.paused).toBe(false); // not read yet: served from memory
    await vi.advanceTimersByTimeAsync(200);

    expect(repo.finds).toBe(findsAfterLoad); // no per-coupon reads
    expect(catalog.saleQueries).toBe(3);
    expect((await catalog.get('c777')).sale).toMatchObject({ paused: true, revision: 1 });
    expect((await catalog.get('c778')).sale?.paused).toBe(false);

    // Served again within the refresh interval: no further query.
    for (const id of ids) await catalog.get(id);
    await vi.advanceTimersByTimeAsync(200);
    expect(catalog.saleQueries).toBe(3);
  });
});

describe('CouponCatalog cached lookup', () => {
  it('when a call finds its coupon idle past the stale bound, then the read it waits for goes out within a few ms, not after the background 100 ms gather, and takes the coupons already due with it', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const repo = new FakeCouponRepository();
    const catalog = new CouponCatalog(repo);
    for (const id of ['idle', 'busy']) {
      await repo.create({ id, initialStock: 10, shardCount: 1, perUserLimit: 0, shardTags: [`${id}#0.0`] });
      repo.coupons.get(id)!.sale = { startsAt: null, endsAt: null, paused: false, revision: 0 };
      await catalog.get(id);
      vi.advanceTimersByTime(1000);
    }
    vi.advanceTimersByTime(4500);
    // 'busy' was read 5.5 s ago: due for the background re-read, served from memory. 'idle', 6.5 s ago: stale.
    await catalog.get('busy');
    repo.coupons.get('idle')!.sale = { startsAt: null, endsAt: null, paused: true, revision: 1 };
    let answered: boolean | undefined;
    const call = catalog.get('idle').then((c) => (answered = c.sale?.paused));
    await vi.advanceTimersByTimeAsync(5);
    expect(answered).toBe(true);
    await call;
    expect(catalog.saleQueries).toBe(1);
  });

  it('when a coupon is in memory, then cached() returns it without a query and still schedules its due sale re-read; unknown ids give undefined and no query', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const repo = new FakeCouponRepository();
    const catalog = new CouponCatalog(repo);
    await repo.create({ id: 'c1', initialStock: 10, shardCount: 1, perUserLimit: 0, shardTags: ['c1#0.0'] });
    repo.coupons.get('c1')!.sale = { startsAt: null, endsAt: null, paused: false, revision: 0 };
    expect(catalog.cached('c1')).toBeUndefined();
    expect(repo.finds).toBe(0);
    const loaded = await catalog.get('c1');
    expect(catalog.cached('c1')).toBe(loaded);
    expect(repo.finds).toBe(1);

    repo.coupons.get('c1')!.sale = { startsAt: null, endsAt: null, paused: true, revision: 1 };
    vi.advanceTimersByTime(6000);
    expect(catalog.cached('c1')?.sale?.paused).toBe(false); // due: served from memory, re-read in the background
    await vi.advanceTimersByTimeAsync(200);
    expect(catalog.saleQueries).toBe(1);
    expect(catalog.cached('c1')?.sale).toMatchObject({ paused: true, revision: 1 });
    expect(repo.finds).toBe(1);
  });
});
