// CompensateService over in-memory fakes of its ports (test/support/fakes): no Redis, NATS or MySQL.
import { describe, expect, it } from 'vitest';
import { homeShard, shardRef } from '../../src/domain/routing.js';
import { fakeDomain } from '../support/fakes/index.js';

const ask = (couponId: string, requestId: string, quantity = 1, userId = '') => ({
  couponId,
  requestId,
  userId,
  quantity: BigInt(quantity),
});

describe('CompensateService over fakes', () => {
  it('when a deduction is compensated, then its units return to its shard and every instance is told', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 6, 2);
    await d.deduct.deduct(ask('c1', 'a', 2));
    const r = await d.compensate.compensate({ couponId: 'c1', requestId: 'a', reason: 'order cancelled' });
    expect(r.outcome).toBe('compensated');
    expect(d.units(c)).toEqual({ avail: 6, transit: 0, net: 0, sum: 6 });
    expect(d.signals.returned).toEqual(['c1']);
    expect(d.store.events.map((e) => e.kind)).toEqual(['D', 'C']);
  });

  it('when the same deduction is compensated twice, then the second answers already_compensated and changes nothing', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 6, 2);
    await d.deduct.deduct(ask('c1', 'a', 2));
    await d.compensate.compensate({ couponId: 'c1', requestId: 'a', reason: '' });
    const again = await d.compensate.compensate({ couponId: 'c1', requestId: 'a', reason: '' });
    expect(again.outcome).toBe('already_compensated');
    expect(d.units(c).avail).toBe(6);
    // A replay of the compensated deduction does not take the units again.
    expect(await d.deduct.deduct(ask('c1', 'a', 2))).toMatchObject({ outcome: 'deducted', replayed: true, compensated: true });
    expect(d.units(c).net).toBe(0);
  });

  it('when no deduction is recorded, then not_deducted', async () => {
    const d = fakeDomain();
    await d.createCoupon('c1', 6, 2);
    expect((await d.compensate.compensate({ couponId: 'c1', requestId: 'never', reason: '' })).outcome).toBe('not_deducted');
  });

  it('when a limited coupon is compensated, then the user may take the units again', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 20, 4, 2);
    await d.deduct.deduct(ask('c1', 'a', 2, 'u1'));
    expect((await d.deduct.deduct(ask('c1', 'b', 1, 'u1'))).outcome).toBe('user_limit_exceeded');
    expect((await d.compensate.compensate({ couponId: 'c1', requestId: 'a', reason: '' })).outcome).toBe('compensated');
    const home = d.store.state(shardRef(c, homeShard(c, 'a', 'u1')));
    expect(home.users.get('u1')).toBe(0);
    expect((await d.deduct.deduct(ask('c1', 'c', 2, 'u1'))).outcome).toBe('deducted');
  });

  it('when the serving shard was lost, then the coupon is recovered first and the restored record is compensated', async () => {
    const d = fakeDomain();
    const c = await d.createCoupon('c1', 8, 2);
    await d.deduct.deduct(ask('c1', 'a', 3));
    d.store.lose(shardRef(c, homeShard(c, 'a', '')));
    const r = await d.compensate.compensate({ couponId: 'c1', requestId: 'a', reason: '' });
    expect(r.outcome).toBe('compensated');
    expect(d.recovery.recoveries).toBe(1);
    expect(d.units(c)).toEqual({ avail: 8, transit: 0, net: 0, sum: 8 });
  });
});
