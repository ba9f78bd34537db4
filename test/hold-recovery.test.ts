// Holds through the data-loss recovery (docs/guarantees.md "When Redis loses data"): the recovery counts held
// units against the bound, so a repair never adds them again; a shard lost with its holds is rebuilt with those
// units back on sale and the lost holds answer NOT_FOUND (never confirmed, never doubled); a hold that outlived
// its shard's hash (the hash alone evicted) ends as expired without giving its units back a second time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { ConfirmOutcome, ExtendOutcome, HoldState, ReleaseOutcome, ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { parseHoldId } from '../src/domain/holds.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { rejection } from './support/rejection.js';
import { loseShard } from './support/shard-loss.js';
import { settled } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'hold-recovery' });
});
afterAll(async () => {
  await a?.close();
});

async function holdsOn(couponId: string, n: number, prefix: string) {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await a.client.reserve({ couponId, requestId: `${prefix}-${i}`, quantity: 2n, ttlMs: 600_000 });
    expect(r.outcome).toBe(ReserveOutcome.HELD);
    out.push(r.hold!.holdId);
  }
  return out;
}

describe('holds and recovery', () => {
  it('when a repair runs with holds outstanding, then it restores nothing: held units count against the bound', async () => {
    const id = uniqueId('hrp');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 4 });
    await holdsOn(id, 10, 'p');
    const r = await a.client.reconcile({ couponId: id, repair: true });
    expect([r.repair!.restoredUnits, r.repair!.loweredUnits, r.repair!.loadedUnits]).toEqual([0n, 0n, 0n]);
    expect([r.consistent, r.redisHeld, r.redisAvailable, r.settledRemaining]).toEqual([true, 20n, 100n, 100n]);
    const level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.available, level.held]).toEqual([80n, 20n]);
  });

  it('when a shard is lost with its holds, then the rebuild puts their units back on sale once and the lost holds answer NOT_FOUND; holds elsewhere survive', async () => {
    const id = uniqueId('hrl');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 4 });
    const coupon = (await a.app.repo.find(id))!;
    const holdIds = await holdsOn(id, 12, 'l');
    const lostShard = parseHoldId(holdIds[0]!).shard;
    const onLost = holdIds.filter((h) => parseHoldId(h).shard === lostShard);
    const elsewhere = holdIds.filter((h) => parseHoldId(h).shard !== lostShard);
    // Everything of that shard goes, as with a flushed master: its hash, its holds set and its record hashes.
    await loseShard(a.app, coupon, lostShard);

    const rec = await a.client.reconcile({ couponId: id, repair: true });
    expect(rec.repair!.rebuiltShards).toEqual([lostShard]);
    // Held units elsewhere stay held; the lost holds' units are available again — exactly once.
    expect([rec.consistent, rec.redisAvailable, rec.redisHeld]).toEqual([true, 100n, BigInt(2 * elsewhere.length)]);
    for (const h of onLost) {
      expect((await a.client.confirm({ target: { case: 'holdId', value: h } })).outcome).toBe(ConfirmOutcome.NOT_FOUND);
      expect((await a.client.release({ target: { case: 'holdId', value: h } })).outcome).toBe(ReleaseOutcome.NOT_FOUND);
    }
    for (const h of elsewhere)
      expect((await a.client.confirm({ target: { case: 'holdId', value: h } })).outcome).toBe(ConfirmOutcome.CONFIRMED);
    const level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.held, level.deducted, level.available]).toEqual([0n, BigInt(2 * elsewhere.length), BigInt(100 - 2 * elsewhere.length)]);
    const done = await settled(a.client, id);
    expect([done.ledgerDeducted, done.redisDrift]).toEqual([BigInt(2 * elsewhere.length), 0n]);
  });

  it("when a shard is lost after its holds were confirmed, then the rebuilt records are still a confirmed hold's: a retried Reserve replays CONFIRMED and a Deduct with that request id is refused, as before the loss", async () => {
    const id = uniqueId('hrc');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    const holdIds = await holdsOn(id, 4, 'c');
    for (const h of holdIds)
      expect((await a.client.confirm({ target: { case: 'holdId', value: h } })).outcome).toBe(ConfirmOutcome.CONFIRMED);
    // Settled: the records come back from the ledger, where a confirmed hold's row carries its mark.
    await settled(a.client, id);
    for (const index of [0, 1]) await loseShard(a.app, coupon, index);
    const rec = await a.client.reconcile({ couponId: id, repair: true });
    expect(rec.repair!.rebuiltShards.length).toBe(2);
    expect(rec.consistent).toBe(true);

    for (let i = 0; i < 4; i++) {
      const again = await a.client.reserve({ couponId: id, requestId: `c-${i}`, quantity: 2n, ttlMs: 600_000 });
      expect([again.outcome, again.replayed, again.hold?.state], `c-${i}`).toEqual([ReserveOutcome.HELD, true, HoldState.CONFIRMED]);
      const refused = await rejection(a.client.deduct({ couponId: id, requestId: `c-${i}`, quantity: 2n }));
      expect(refused?.code, `c-${i}`).toBe(status.FAILED_PRECONDITION);
    }
    // Nothing taken twice: 8 units confirmed, 92 on sale.
    const level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.available, level.held]).toEqual([92n, 0n]);
  });

  it('when only a shard hash is lost and its holds outlive it, then the rebuild counts their units and the stale holds never give them back again', async () => {
    const id = uniqueId('hre');
    await a.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    const holdIds = await holdsOn(id, 8, 'e');
    const shard = parseHoldId(holdIds[0]!).shard;
    const stale = holdIds.filter((h) => parseHoldId(h).shard === shard);
    await a.app.redis.del(a.app.store.keys(shardRef(coupon, shard)).shard);
    const rec = await a.client.reconcile({ couponId: id, repair: true });
    expect(rec.repair!.rebuiltShards).toEqual([shard]);
    expect([rec.consistent, rec.redisAvailable]).toEqual([true, 50n]);
    // The stale holds' units are already back (the rebuild loaded them): confirming is refused, releasing gives nothing.
    expect((await a.client.confirm({ target: { case: 'holdId', value: stale[0]! } })).outcome).toBe(ConfirmOutcome.EXPIRED);
    for (const h of stale.slice(1)) {
      const r = await a.client.release({ target: { case: 'holdId', value: h } });
      expect([r.outcome, r.released]).toEqual([ReleaseOutcome.EXPIRED, 0n]);
    }
    const after = await a.client.reconcile({ couponId: id });
    expect([after.consistent, after.redisAvailable, after.redisDrift]).toEqual([true, 50n, 0n]);
    expect(homeShard(coupon, parseHoldId(stale[0]!).requestId, '')).toBe(shard);
  });

  it('when a hold outlived its shard hash, then ExtendHold answers EXPIRED like Confirm and Release, never EXTENDED', async () => {
    const id = uniqueId('hrx');
    await a.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    const [holdId] = await holdsOn(id, 1, 'x');
    const shard = parseHoldId(holdId!).shard;
    await a.app.redis.del(a.app.store.keys(shardRef(coupon, shard)).shard);
    expect((await a.client.reconcile({ couponId: id, repair: true })).repair!.rebuiltShards).toEqual([shard]);
    const target = { case: 'holdId' as const, value: holdId! };
    // It can never be confirmed (its units are part of the rebuilt stock): an extension would be a false promise,
    // and an order would commit on it, confirm its other items and then give them back.
    const extended = await a.client.extendHold({ target, ttlMs: 600_000 });
    expect(ExtendOutcome[extended.outcome]).toBe('EXPIRED');
    expect((await a.client.confirm({ target })).outcome).toBe(ConfirmOutcome.EXPIRED);
    const after = await a.client.reconcile({ couponId: id });
    expect([after.consistent, after.redisAvailable, after.redisHeld]).toEqual([true, 20n, 0n]);
  });
});
