// DeductService over in-memory fakes of its ports (test/support/fakes): no Redis, NATS or MySQL.
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { Coupon } from '../../src/domain/ports.js';
import { homeShard, shardRef } from '../../src/domain/routing.js';
import { fakeDomain } from '../support/fakes/index.js';

/** A request id whose home (unlimited coupon) is shard `index`. */
function requestOn(coupon: Coupon, index: number, prefix = 'r'): string {
  for (let i = 0; ; i++) if (homeShard(coupon, `${prefix}${i}`, '') === index) return `${prefix}${i}`;
}

const ask = (couponId: string, requestId: string, quantity = 1, userId = '') => ({
  couponId,
  requestId,
  userId,
  quantity: BigInt(quantity),
});

describe('DeductService over fakes', () => {
  it('when the home shard covers the request, then one script call takes the units from avail into net', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 8, 2);
    const r = await d.deduct.deduct(ask('c1', 'a', 3));
    expect(r).toMatchObject({ outcome: 'deducted', replayed: false });
    expect(d.store.calls.deduct).toBe(1);
    expect(d.units(c)).toEqual({ avail: 5, transit: 0, net: 3, sum: 8 });
    expect(d.store.events).toHaveLength(1);
  });

  it('when the call is already cancelled (its deadline passed), then no script runs and no unit moves', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 8, 2);
    const err = await d.deduct.deduct(ask('c1', 'a', 1), AbortSignal.abort()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).kind).toBe('deadline_exceeded');
    expect(d.store.calls.deduct ?? 0).toBe(0);
    expect(d.units(c)).toEqual({ avail: 8, transit: 0, net: 0, sum: 8 });
  });

  it('when the same request id is retried, then it replays without taking units again', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 8, 2);
    await d.deduct.deduct(ask('c1', 'a', 2));
    const again = await d.deduct.deduct(ask('c1', 'a', 2));
    expect(again).toMatchObject({ outcome: 'deducted', replayed: true });
    expect(d.units(c).net).toBe(2);
  });

  it('when a request id is reused with another quantity, then FAILED_PRECONDITION names the field', async () => {
    const d = fakeDomain();
    await d.createCoupon('c1', 8, 2);
    await d.deduct.deduct(ask('c1', 'a', 2));
    const err = await d.deduct.deduct(ask('c1', 'a', 3)).catch((e) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err.kind).toBe('failed_precondition');
    expect(err.message).toContain('different quantity');
  });

  it('when a limited coupon is reused by another user, then the claim on the request shard refuses it', async () => {
    const d = fakeDomain();
    await d.createCoupon('c1', 20, 4, 2);
    await d.deduct.deduct(ask('c1', 'a', 1, 'u1'));
    const err = await d.deduct.deduct(ask('c1', 'a', 1, 'u2')).catch((e) => e);
    expect(err.kind).toBe('failed_precondition');
    expect(err.message).toContain('different user_id');
  });

  it('when a user would pass the per-user limit, then user_limit_exceeded and nothing is taken', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 20, 4, 2);
    expect((await d.deduct.deduct(ask('c1', 'a', 2, 'u1'))).outcome).toBe('deducted');
    expect((await d.deduct.deduct(ask('c1', 'b', 1, 'u1'))).outcome).toBe('user_limit_exceeded');
    expect((await d.deduct.deduct(ask('c1', 'c', 3, 'u2'))).outcome).toBe('user_limit_exceeded');
    expect(d.units(c).net).toBe(2);
  });

  it('when the home shard is short, then units move from the fullest shard, land once and are acknowledged', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 6, 3); // 2 per shard
    const id = requestOn(c, 0);
    d.store.shard(shardRef(c, 0))!.avail = 0;
    d.store.shard(shardRef(c, 1))!.avail = 4; // same units, placed elsewhere
    const r = await d.deduct.deduct(ask('c1', id, 3));
    expect(r).toMatchObject({ outcome: 'deducted', shard: 0 });
    expect(d.deduct.stats.fallbacks).toBe(1);
    expect(d.deduct.stats.movedUnits).toBe(3);
    await new Promise((res) => setImmediate(res)); // the acknowledgements are not awaited
    expect(d.units(c)).toEqual({ avail: 3, transit: 0, net: 3, sum: 6 });
    expect(await d.store.pendingMoves(shardRef(c, 1))).toEqual([]);
  });

  it('when all shards together hold fewer units than asked, then insufficient and no units move', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 4, 2);
    const r = await d.deduct.deduct(ask('c1', 'a', 5));
    expect(r.outcome).toBe('insufficient');
    expect(d.units(c)).toEqual({ avail: 4, transit: 0, net: 0, sum: 4 });
  });

  it('when every shard is empty, then sold_out, and later calls are refused from memory with one plain read', async () => {
    const d = fakeDomain();
    await d.createCoupon('c1', 2, 2);
    await d.deduct.deduct(ask('c1', 'a', 1));
    await d.deduct.deduct(ask('c1', 'b', 1));
    expect((await d.deduct.deduct(ask('c1', 'c', 1))).outcome).toBe('sold_out');
    const scripts = d.store.calls.deduct;
    expect((await d.deduct.deduct(ask('c1', 'd', 1))).outcome).toBe('sold_out');
    expect(d.store.calls.deduct).toBe(scripts);
    expect(d.deduct.stats.soldOutFastPath).toBe(1);
    // A retry of a request that deducted before the sell-out still gets its DEDUCTED back.
    expect(await d.deduct.deduct(ask('c1', 'a', 1))).toMatchObject({ outcome: 'deducted', replayed: true });
  });

  it('when units are given back on another instance, then its signal drops the sold-out flag here', async () => {
    const d = fakeDomain();
    await d.createCoupon('c1', 1, 1);
    await d.deduct.deduct(ask('c1', 'a', 1));
    expect((await d.deduct.deduct(ask('c1', 'b', 1))).outcome).toBe('sold_out');
    expect(d.soldOut.isSoldOut('c1')).toBe(true);
    d.signals.stockReturned('c1');
    await Promise.resolve();
    expect(d.soldOut.isSoldOut('c1')).toBe(false);
  });

  it('when the home shard is lost, then the coupon is recovered and the call deducts from the rebuilt shard', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 9, 3);
    const id = requestOn(c, 2);
    await d.deduct.deduct(ask('c1', id, 2));
    d.store.lose(shardRef(c, 2));
    const retry = await d.deduct.deduct(ask('c1', id, 2));
    expect(retry).toMatchObject({ outcome: 'deducted', replayed: true });
    expect(d.reloads).toEqual([{ couponId: 'c1', shards: [2], units: 1 }]);
    expect(d.units(c)).toEqual({ avail: 7, transit: 0, net: 2, sum: 9 });
    const fresh = await d.deduct.deduct(ask('c1', requestOn(c, 2, 's'), 1));
    expect(fresh.outcome).toBe('deducted');
  });

  it('when a recovery holds the coupon past the patience, then UNAVAILABLE with a retry-after', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 4, 1);
    d.store.shard(shardRef(c, 0))!.pz = Date.now() + 5_000;
    const err = await d.deduct.deduct(ask('c1', 'a', 1)).catch((e) => e);
    expect(err.kind).toBe('unavailable');
    expect(err.retryAfterMs).toBe(1000);
    expect(d.units(c).net).toBe(0);
  });

  it('when the credits were planned before a recovery, then none applies and the call plans again', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 4, 2);
    const id = requestOn(c, 0);
    d.store.shard(shardRef(c, 0))!.avail = 0;
    d.store.shard(shardRef(c, 1))!.avail = 4;
    let recovered = false;
    d.store.beforeCall = async (method) => {
      // Between the move out and the deduct that would credit it, a recovery runs (new epoch).
      if (method === 'deduct' && d.store.calls.moveOut && !recovered) {
        recovered = true;
        await d.recovery.recover('c1', 'test');
      }
    };
    const r = await d.deduct.deduct(ask('c1', id, 1));
    expect(r.outcome).toBe('deducted');
    await d.sweeper.sweep(c);
    expect(d.units(c).sum).toBe(4);
  });
});
