// A shard key that vanished (eviction, lost data) is reloaded from MySQL — once — and the request retried.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { claimShard, homeShard, shardRef } from '../src/domain/routing.js';
import { closeInstances, startInstancePair } from './support/instance-pair.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { bucketKeys } from './support/bucket-fields.js';
import { settled } from './support/settlement.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  [a, b] = await startInstancePair();
});
afterAll(() => closeInstances(b, a));

describe('missing shard reload', () => {
  it('when a shard hash vanishes mid-sale, then concurrent calls on two instances reload it once with exactly the units it should hold', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 4 });
    const coupon = (await a.app.repo.find(id))!;
    const rids = Array.from({ length: 40 }, (_, i) => `pre-${i}`);
    for (const rid of rids.slice(0, 12)) await a.client.deduct({ couponId: id, requestId: rid, quantity: 1n });
    const before = await shardState(a.app, id);
    expect(before.available).toBe(88);
    // Lose the shard that served most of them (its hash only: its outbox still holds the events in flight).
    const counts = new Map<number, number>();
    for (const rid of rids.slice(0, 12)) counts.set(homeShard(coupon, rid, ''), (counts.get(homeShard(coupon, rid, '')) ?? 0) + 1);
    const lost = [...counts.entries()].sort((x, y) => y[1] - x[1])[0]![0];
    const lostAvail = before.levels.find((l) => l.index === lost)!.available!;
    await a.app.redis.del(a.app.store.keys(shardRef(coupon, lost)).shard);

    // Requests homed on the lost shard, from both instances at once.
    const onLost = Array.from({ length: 400 }, (_, i) => `after-${i}`)
      .filter((rid) => homeShard(coupon, rid, '') === lost)
      .slice(0, 10);
    const rs = await Promise.all(onLost.map((rid, i) => (i % 2 ? a : b).client.deduct({ couponId: id, requestId: rid, quantity: 1n })));
    expect(rs.every((r) => r.outcome === DeductOutcome.DEDUCTED)).toBe(true);
    const after = await shardState(a.app, id);
    // The reload put back exactly what the shard held (MySQL remaining − events in flight − other shards):
    // not one unit created, not one lost.
    expect(after.available + after.inTransit).toBe(88 - onLost.length);
    expect(after.levels.find((l) => l.index === lost)!.available).toBe(lostAvail - onLost.length);
    // Its net counter was rebuilt too, so the level still adds up: deducted = every DEDUCTED answer.
    const level = (await a.client.getStock({ couponId: id })).level!;
    expect(level.deducted).toBe(BigInt(12 + onLost.length));
    expect(level.available).toBe(BigInt(88 - onLost.length));
  });
});

describe('a limited coupon whose claim shard is lost', () => {
  it('when the shard holding a request claim vanishes, then Compensate still finds the deduction and another user cannot reuse the id', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 4, perUserLimit: 2 });
    const coupon = (await a.app.repo.find(id))!;
    // A request whose claim lives on another shard than its user's records.
    let rid = '';
    for (let i = 0; !rid; i++) if (claimShard(coupon, `lim-${i}`) !== homeShard(coupon, '', 'u0')) rid = `lim-${i}`;
    expect((await a.client.deduct({ couponId: id, requestId: rid, userId: 'u0', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    // The claim's shard goes, with its claims (one node's keys under that tag).
    const k = a.app.store.keys(shardRef(coupon, claimShard(coupon, rid)));
    // One node's keys under that tag: the shard hash and every claim hash.
    await a.app.redis.del(k.shard, ...bucketKeys(k, 'claims', a.app.config.idempotencyWindowS));

    const reused = await b.client.deduct({ couponId: id, requestId: rid, userId: 'u1', quantity: 1n }).then(
      () => 0,
      (e: { code: number }) => e.code,
    );
    expect(reused).toBe(status.FAILED_PRECONDITION);
    expect((await b.client.compensate({ couponId: id, requestId: rid, reason: 'refund' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    const level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.available, level.deducted]).toEqual([40n, 0n]);
  });
});

describe('the sold-out fast path next to a lost shard', () => {
  it('when the home shard of deducted requests loses its data after the coupon sold out, then their retries are answered DEDUCTED (replayed) once it is rebuilt, never SOLD_OUT', async () => {
    const w = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
    try {
      const id = uniqueId('sofl');
      await w.client.createCoupon({ couponId: id, totalStock: 6n, shardCount: 2 });
      const ids = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
      for (const rid of ids)
        expect((await w.client.deduct({ couponId: id, requestId: rid, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
      // This instance learns the coupon is sold out: from now on its refusals come from the fast path.
      expect((await w.client.deduct({ couponId: id, requestId: 'late', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
      await settled(w.client, id);
      const coupon = (await w.app.repo.find(id))!;
      const lost = homeShard(coupon, 'r0', '');
      const onLost = ids.filter((rid) => homeShard(coupon, rid, '') === lost);
      // Everything of that shard goes, as with a flushed master: its hash, outbox, user counts and records.
      const k = w.app.store.keys(shardRef(coupon, lost));
      await w.app.redis.del(k.shard, k.outbox, k.users, ...bucketKeys(k, 'records', w.app.config.idempotencyWindowS));

      const fast = w.app.deduct.stats.soldOutFastPath;
      const retries = await Promise.all(onLost.map((rid) => w.client.deduct({ couponId: id, requestId: rid, quantity: 1n })));
      expect(retries.map((r) => [r.outcome, r.replayed])).toEqual(onLost.map(() => [DeductOutcome.DEDUCTED, true]));
      // They came by the fast path, which saw the shard gone and left it for the path that rebuilds it.
      expect(w.app.deduct.stats.soldOutFastPath).toBeGreaterThanOrEqual(fast + onLost.length);
      // A request that never deducted is still refused, and nothing was sold twice.
      expect((await w.client.deduct({ couponId: id, requestId: 'never', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
      const rec = await settled(w.client, id);
      expect([rec.consistent, rec.redisAvailable, rec.settledRemaining]).toEqual([true, 0n, 0n]);
    } finally {
      await w.close();
    }
  });
});
