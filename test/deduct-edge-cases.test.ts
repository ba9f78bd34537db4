// Retries, replays and refusals at the edges of Deduct: move ids that a retry could repeat, a replay of a
// compensated deduction, fallback next to a fenced shard, a move acknowledged on a lost shard, and the claims
// limited coupons leave behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { CouponCatalog } from '../src/domain/coupon-catalog.js';
import { DeductService } from '../src/domain/deduct.js';
import { DomainError } from '../src/domain/errors.js';
import { MoveSweeper } from '../src/domain/move-sweeper.js';
import type { Coupon } from '../src/domain/ports.js';
import { claimShard, homeShard, shardRef } from '../src/domain/routing.js';
import { SoldOutCache } from '../src/domain/sold-out-cache.js';
import { CLAIM_HOLD_S, RedisStockStore } from '../src/redis/stock-store.js';
import { errOf, noReload } from './support/deduct-setup.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { requestIdHomedAt } from './support/routing.js';
import { shardState } from './support/inspect.js';
import { bucketField, dropClaim } from './support/bucket-fields.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp();
});
afterAll(async () => {
  await a?.close();
});

async function coupon(stock: number, shards: number, perUserLimit = 0): Promise<Coupon> {
  const id = uniqueId();
  await a.client.createCoupon({ couponId: id, totalStock: BigInt(stock), shardCount: shards, perUserLimit });
  return (await a.app.repo.find(id))!;
}

async function untilNoTransit(couponId: string) {
  const until = Date.now() + 5000;
  for (;;) {
    const s = await shardState(a.app, couponId);
    if ((s.inTransit === 0 && s.pendingMoves === 0) || Date.now() > until) return s;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('fallback move ids', () => {
  it('when a request is retried after its earlier move-out was landed by the sweeper, then the retry moves units under a new id and every unit is kept', async () => {
    const c = await coupon(20, 2);
    const rid = 'retried';
    const home = homeShard(c, rid, '');
    const other = 1 - home;
    // The first attempt took 5 units out under the id a per-round scheme gives round 0, then died; the
    // sweeper credited the home shard and acknowledged the move.
    expect(await a.app.store.moveOut(shardRef(c, other), `${rid}/0/${other}>${home}`, home, 5)).toBe(5);
    expect(await new MoveSweeper(a.app.store, noReload, 0).sweep(c)).toBe(1);
    // The retry needs 3 more units from the other shard: they must land, not vanish behind an applied credit.
    const r = await a.client.deduct({ couponId: c.id, requestId: rid, quantity: 18n });
    expect(r).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: false });
    const s = await untilNoTransit(c.id);
    expect(s.net).toBe(18);
    expect(s.available + s.inTransit + s.net).toBe(20);
    expect(s.levels.map((l) => l.available)).toEqual(home === 0 ? [0, 2] : [2, 0]);
  });
});

describe('move-ack on a lost shard', () => {
  it('when the source shard hash is gone, then the acknowledgement creates nothing and the move stays recorded', async () => {
    const c = await coupon(10, 2);
    const source = shardRef(c, 0);
    expect(await a.app.store.moveOut(source, 'gone', 1, 3)).toBe(3);
    await a.app.redis.del(a.app.store.keys(source).shard);
    expect(await a.app.store.ackMove(source, 'gone')).toBe(false);
    expect(await a.app.redis.exists(a.app.store.keys(source).shard)).toBe(0);
    expect((await a.app.store.pendingMoves(source)).map((m) => [m.moveId, m.quantity])).toEqual([['gone', 3]]);
  });
});

describe('fallback next to a lost shard', () => {
  it('when the only shard with units left has lost its data, then a short request waits for its rebuild and is DEDUCTED, never SOLD_OUT', async () => {
    const c = await coupon(2, 2); // one unit per shard
    const first = requestIdHomedAt(c, 0, 'a');
    expect((await a.client.deduct({ couponId: c.id, requestId: first, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    // Shard 1 still owes its unit; its hash goes as with a flushed master (its outbox holds no event).
    await a.app.redis.del(a.app.store.keys(shardRef(c, 1)).shard);
    const reloads = a.app.deduct.stats.reloads;
    // Home shard 0 is empty: the fallback finds shard 1 lost, not empty.
    const r = await a.client.deduct({ couponId: c.id, requestId: requestIdHomedAt(c, 0, 'b'), quantity: 1n });
    expect(r.outcome).toBe(DeductOutcome.DEDUCTED);
    expect(a.app.deduct.stats.reloads).toBeGreaterThan(reloads);
    const s = await untilNoTransit(c.id);
    expect([s.available, s.net]).toEqual([0, 2]);
    expect((await a.client.deduct({ couponId: c.id, requestId: requestIdHomedAt(c, 1, 'c'), quantity: 1n })).outcome).toBe(
      DeductOutcome.SOLD_OUT,
    );
  });
});

describe('a replay of a compensated deduction', () => {
  it('when a deduction was compensated, then its replay says so on gRPC and on Connect, also from the sold-out fast path', async () => {
    const c = await coupon(1, 1);
    expect((await a.client.deduct({ couponId: c.id, requestId: 'd', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    const plain = await a.client.deduct({ couponId: c.id, requestId: 'd', quantity: 1n });
    expect(plain).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true, compensated: false });
    expect((await a.client.compensate({ couponId: c.id, requestId: 'd', reason: 'cancelled' })).outcome).toBe(
      CompensateOutcome.COMPENSATED,
    );

    const grpc = await a.client.deduct({ couponId: c.id, requestId: 'd', quantity: 1n });
    expect(grpc).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true, compensated: true });
    const res = await fetch(`${a.httpUrl}/inventory.v1.InventoryService/Deduct`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ couponId: c.id, requestId: 'd', quantity: '1' }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ outcome: 'DEDUCT_OUTCOME_DEDUCTED', replayed: true, compensated: true });

    // Sell the unit again and let this instance learn the coupon is sold out: the replay is then served
    // from the fast path, which must carry the flag too.
    expect((await a.client.deduct({ couponId: c.id, requestId: 'e', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await a.client.deduct({ couponId: c.id, requestId: 'f', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
    const fast = a.app.deduct.stats.soldOutFastPath;
    const fromFastPath = await a.client.deduct({ couponId: c.id, requestId: 'd', quantity: 1n });
    expect(a.app.deduct.stats.soldOutFastPath).toBe(fast + 1);
    expect(fromFastPath).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true, compensated: true });
    const live = await a.client.deduct({ couponId: c.id, requestId: 'e', quantity: 1n });
    expect(live).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true, compensated: false });
  });
});

describe('fallback next to a fenced shard', () => {
  it('when one shard is fenced, then fallback takes from the others, and answers UNAVAILABLE with a retry hint only when nothing else can serve', async () => {
    const c = await coupon(40, 4);
    const home = 0;
    // Shard 3 keeps its 10 units.
    const [fenced, low] = [1, 2];
    // Make the fenced shard the fullest (15), so a plan that ignored the fence would pick it first.
    const store = a.app.store;
    expect(await store.moveOut(shardRef(c, low), 'prep', fenced, 5)).toBe(5);
    expect(await store.credit(shardRef(c, fenced), 'M:prep', 5)).toBe('applied');
    expect(await store.ackMove(shardRef(c, low), 'prep')).toBe(true);

    const fencedTag = `{${c.shardTags[fenced]}}`;
    const fence = {
      retryAfterMs: (key: string) => (key.includes(fencedTag) ? 200 : undefined),
      assertOpen(key: string) {
        if (key.includes(fencedTag)) throw new DomainError('unavailable', 'fenced', { retryAfterMs: 200 });
      },
    };
    const fencedStore = new RedisStockStore(a.app.redis, { namespace: a.namespace, idempotencyWindowS: 3600, fence });
    const svc = new DeductService(new CouponCatalog(a.app.repo), fencedStore, new SoldOutCache(2000), noReload, 100);
    const deduct = (prefix: string, quantity: number) =>
      svc.deduct({ couponId: c.id, requestId: requestIdHomedAt(c, home, prefix), userId: '', quantity: BigInt(quantity) }).then(
        (r) => r.outcome,
        (e: DomainError) => `${e.kind}/${e.retryAfterMs}`,
      );

    // home 10, fenced 15, low 5, shard 3 10: the 8 more units come from shard 3.
    expect(await deduct('a', 18)).toBe('deducted');
    // home 0, low 5, shard 3 2: 10 can only be covered with the fenced shard's units.
    expect(await deduct('b', 10)).toBe('unavailable/200');
    expect(await deduct('c', 7)).toBe('deducted');
    // Only the fenced shard has units: not sold out, but not sellable now either.
    expect(await deduct('d', 1)).toBe('unavailable/200');
    expect(await deduct('e', 16)).toBe('insufficient');

    const s = await untilNoTransit(c.id);
    expect(s.levels.map((l) => l.available)).toEqual([0, 15, 0, 0]);
    expect(s.net).toBe(25);
    expect(s.available + s.net).toBe(40);
  });
});

describe('claims of limited coupons', () => {
  it('when limited requests are refused, then their claims are short-lived; a deduction keeps its claim for the window, and reuse with another user is still caught', async () => {
    const c = await coupon(1, 2, 1);
    const window = a.app.config.idempotencyWindowS;
    const claimKeys = (rid: string) => a.app.store.keys(shardRef(c, claimShard(c, rid)));
    const claimOf = (rid: string) => bucketField(a.app.redis, claimKeys(rid), 'claims', window, rid);
    // A kept claim is "user|quantity" (it lives as long as its bucket: at least the window); a held one carries
    // its lapse time, "user|quantity|holdUntilMs".
    const holdLeftMs = async (rid: string) => {
      const parts = (await claimOf(rid))?.split('|') ?? [];
      return parts.length === 3 ? Number(parts[2]) - Date.now() : parts.length === 2 ? Number.POSITIVE_INFINITY : null;
    };
    expect(window).toBeGreaterThan(CLAIM_HOLD_S);

    expect((await a.client.deduct({ couponId: c.id, requestId: 'won', userId: 'u0', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    expect(await claimOf('won')).toBe('u0|1');
    const refused = [];
    for (let u = 1; u <= 5; u++) {
      const r = await a.client.deduct({ couponId: c.id, requestId: `lost${u}`, userId: `u${u}`, quantity: 1n });
      refused.push(r.outcome);
    }
    const overLimit = await a.client.deduct({ couponId: c.id, requestId: 'again', userId: 'u0', quantity: 1n });
    expect(refused).toEqual(Array(5).fill(DeductOutcome.SOLD_OUT));
    expect([DeductOutcome.SOLD_OUT, DeductOutcome.USER_LIMIT_EXCEEDED]).toContain(overLimit.outcome);
    for (const rid of ['lost1', 'lost2', 'lost3', 'lost4', 'lost5', 'again']) {
      const left = await holdLeftMs(rid);
      expect(left, rid).toBeGreaterThan(0);
      expect(left, rid).toBeLessThanOrEqual(CLAIM_HOLD_S * 1000 + 1000);
    }

    const reuse = await errOf(a.client.deduct({ couponId: c.id, requestId: 'won', userId: 'u9', quantity: 1n }));
    expect(reuse?.code).toBe(status.FAILED_PRECONDITION);
    expect(reuse?.details).toMatch(/user_id/);
    // A claim that lapsed while its call ran (or was lost) is put back for the window by the replay.
    await dropClaim(a.app.redis, claimKeys('won'), window, 'won');
    expect(await claimOf('won')).toBeNull();
    const replay = await a.client.deduct({ couponId: c.id, requestId: 'won', userId: 'u0', quantity: 1n });
    expect(replay).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });
    expect(await claimOf('won')).toBe('u0|1');
    expect((await shardState(a.app, c.id)).net).toBe(1);
  });
});
