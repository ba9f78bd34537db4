// A recovery stopped part-way (a write's replica WAIT timing out, a Redis or MySQL error, the instance dying)
// must leave nothing on sale that should not be: the next recovery finishes the work. It used to write a lost
// shard's hash first and its request records, user counts and claims after, and to settle the moves out of a
// lost shard after that, and its `finally` resumed the coupon either way: a rebuilt shard then served without
// its records (a retry deducted again, a limit-1 buyer bought twice) and an orphaned move was landed by the
// sweeper on top of the rebuilt shard's share (45 sold of 40). Now a lost shard's hash is its last write
// (src/recovery/coupon-recovery.ts). Each case below fails the recovery once, right after one of its writes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisRecoveryStore } from '../src/redis/recovery-store.js';
import type { Coupon } from '../src/domain/model.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { loseShard, shardState } from './support/inspect.js';
import { ledgerFigures, settled, sleep, waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'sweep,relay,settle', SHARDSTOCK_SWEEP_INTERVAL_MS: '100' });
});
afterAll(async () => {
  await a?.close();
});

type WriteStep = 'adjust' | 'forgetMoves' | 'restoreRecords' | 'restoreUserCounts' | 'restoreClaims' | 'rebuild';

/** Makes the recovery's next call of `step` fail once, after its write was made (as a replica WAIT that times out
 * does). Returns how many times it failed, and undoes itself after that one failure. */
function failOnceAfter(step: WriteStep): { failed: () => number } {
  const store = (a.app.settlement.recovery as unknown as { d: { store: RedisRecoveryStore } }).d.store as unknown as Record<
    WriteStep,
    (...args: unknown[]) => Promise<unknown>
  >;
  const real = store[step];
  let failed = 0;
  store[step] = async (...args: unknown[]) => {
    const out = await real.apply(store, args);
    if (failed === 0) {
      failed++;
      store[step] = real;
      throw new Error('ReplicationTimeout: write not acknowledged by 1 replica(s) within 200 ms (injected)');
    }
    return out;
  };
  return { failed: () => failed };
}

/** A client retrying with the same request id until it gets an answer (UNAVAILABLE while the shard recovers). */
async function deduct(couponId: string, requestId: string, userId = '') {
  let last: unknown;
  for (let i = 0; i < 40; i++) {
    try {
      return await a.client.deduct({ couponId, requestId, userId, quantity: 1n });
    } catch (err) {
      last = err;
      await sleep(100);
    }
  }
  throw last;
}

function usersHomedOn(coupon: Coupon, shard: number, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (homeShard(coupon, 'x', `u${i}`) === shard) out.push(`u${i}`);
  return out;
}

describe('a lost shard whose recovery stops after one of its writes', () => {
  for (const step of ['forgetMoves', 'restoreRecords', 'restoreUserCounts', 'restoreClaims', 'rebuild'] as const) {
    it(`after ${step}: retries replay and limit-1 buyers are refused, once the shard is back`, async () => {
      const id = uniqueId('rint');
      await a.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2, perUserLimit: 1 });
      const coupon = (await a.app.repo.find(id))!;
      const buyers = usersHomedOn(coupon, 0, 4);
      for (const u of buyers) expect((await deduct(id, `first-${u}`, u)).outcome).toBe(DeductOutcome.DEDUCTED);
      await settled(a.client, id, 20_000);

      await loseShard(a.app, coupon, 0);
      const injected = failOnceAfter(step);
      const answers = [];
      for (const u of buyers) {
        const retry = await deduct(id, `first-${u}`, u);
        const again = await deduct(id, `again-${u}`, u);
        answers.push({ u, retry: DeductOutcome[retry.outcome], replayed: retry.replayed, again: DeductOutcome[again.outcome] });
      }
      expect(injected.failed()).toBe(1);
      expect(answers).toEqual(buyers.map((u) => ({ u, retry: 'DEDUCTED', replayed: true, again: 'USER_LIMIT_EXCEEDED' })));

      const r = await settled(a.client, id, 20_000);
      expect(r.consistent).toBe(true);
      const f = await ledgerFigures(a.app, id);
      expect({ rows: f.deductRows, units: f.deductUnits, duplicates: f.duplicates }).toEqual({ rows: 4, units: 4, duplicates: 0 });
      expect((await shardState(a.app, id)).available).toBe(16);
    });
  }
});

describe('moves out of a lost shard, when the recovery stops after one of its writes', () => {
  for (const step of ['adjust', 'forgetMoves', 'rebuild'] as const) {
    it(`after ${step}: the orphaned move never lands twice`, async () => {
      const id = uniqueId('rmov');
      await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 2 });
      const coupon = (await a.app.repo.find(id))!;
      const source = shardRef(coupon, 0);
      // A mover took 5 units out of shard 0 for shard 1, then died before the credit; then shard 0's hash is lost
      // alone (its moves hash survives).
      expect(await a.app.store.moveOut(source, 'dead/0>1', 1, 5)).toBe(5);
      await a.app.redis.del(a.app.store.keys(source).shard);

      const injected = failOnceAfter(step);
      let homed = 0;
      for (let i = 0; ; i++) {
        if (homeShard(coupon, `r${i}`, '') !== 0) continue;
        expect((await deduct(id, `r${i}`)).outcome).toBe(DeductOutcome.DEDUCTED);
        if (++homed === 1) break;
      }
      expect(injected.failed()).toBe(1);

      // Whatever the sweeper does with the move from here, the coupon holds 39 units and no shard a negative transit.
      const s = await waitFor(
        'the move settled',
        () => shardState(a.app, id),
        (st) => st.pendingMoves === 0,
        15_000,
      );
      await sleep(500);
      const after = await shardState(a.app, id);
      expect({ available: after.available, inTransit: after.inTransit, pendingMoves: after.pendingMoves }).toEqual({
        available: 39,
        inTransit: 0,
        pendingMoves: 0,
      });
      expect(s.levels.every((l) => l.inTransit >= 0)).toBe(true);
      const r = await settled(a.client, id, 20_000);
      expect({ consistent: r.consistent, redisDrift: Number(r.redisDrift) }).toEqual({ consistent: true, redisDrift: 0 });
    });
  }
});

describe('a shard whose transit went below zero', () => {
  it('does not cancel a surplus elsewhere: Reconcile shows it and a repair lowers it', async () => {
    const id = uniqueId('rneg');
    await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    // What a move landed twice leaves: the target 5 units over, the source's transit at -5.
    await a.app.redis.hincrby(a.app.store.keys(shardRef(coupon, 0)).shard, 'transit', -5);
    await a.app.redis.hincrby(a.app.store.keys(shardRef(coupon, 1)).shard, 'avail', 5);
    const r = await a.client.reconcile({ couponId: id });
    expect({ consistent: r.consistent, redisDrift: Number(r.redisDrift), redisAvailable: Number(r.redisAvailable) }).toEqual({
      consistent: false,
      redisDrift: 5,
      redisAvailable: 45,
    });
    const repaired = await a.client.reconcile({ couponId: id, repair: true });
    expect({ consistent: repaired.consistent, redisAvailable: Number(repaired.redisAvailable) }).toEqual({
      consistent: true,
      redisAvailable: 40,
    });
  });
});
