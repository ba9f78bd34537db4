// A fallback move out of a shard whose hash is then lost while its moves hash survives (a key evicted or
// deleted alone). The move's transit units went with the hash: either the move had landed at its target (the
// units are there) or it had not (no live shard counts them, so the recovery's plan gives them to the rebuilt
// shards). Before the fix the sweeper then landed the move anyway: a second copy of its units on the target
// (oversold), or an ack that drove the rebuilt source's transit below zero. Each case sells out here and must
// sell exactly its stock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moveCreditId } from '../src/domain/ids.js';
import { MoveSweeper } from '../src/domain/move-sweeper.js';
import type { ShardReloader } from '../src/domain/shard-reloader.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { loseShard, shardState } from './support/inspect.js';
import { waitFor } from './support/settlement.js';

const TOTAL = 40;
let a: TestApp;
beforeAll(async () => {
  // The sweep lands a move once it is 3 s old: the recovery below always runs first.
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '100' });
});
afterAll(async () => {
  await a?.close();
});

/** Sells until SOLD_OUT with new request ids; answers how many were DEDUCTED. */
async function sellOut(id: string): Promise<number> {
  let sold = 0;
  for (let i = 0; i < TOTAL + 10; i++) {
    const r = await a.client.deduct({ couponId: id, requestId: `s${i}`, quantity: 1n });
    if (r.outcome !== DeductOutcome.DEDUCTED) {
      expect(r.outcome).toBe(DeductOutcome.SOLD_OUT);
      return sold;
    }
    sold++;
  }
  return sold;
}

/** A request id whose home is the given shard. */
function homedOn(coupon: Parameters<typeof homeShard>[0], shard: number, prefix: string): string {
  for (let i = 0; ; i++) if (homeShard(coupon, `${prefix}${i}`, '') === shard) return `${prefix}${i}`;
}

async function lostSourceAfterMove(landed: boolean) {
  const id = uniqueId(landed ? 'rml' : 'rmn');
  await a.client.createCoupon({ couponId: id, totalStock: BigInt(TOTAL), shardCount: 2 });
  const coupon = (await a.app.repo.find(id))!;
  const [source, target] = [shardRef(coupon, 0), shardRef(coupon, 1)];
  // Step 1 of a move by an instance that then died: 5 units leave shard 0 for shard 1.
  expect(await a.app.store.moveOut(source, 'dead/0>1', 1, 5)).toBe(5);
  if (landed) expect(await a.app.store.credit(target, moveCreditId('dead/0>1'), 5)).toBe('applied');
  // Shard 0's hash goes alone; its moves hash stays.
  await a.app.redis.del(a.app.store.keys(source).shard);
  expect(await a.app.store.pendingMoves(source)).toHaveLength(1);
  // A Deduct homed on shard 0 finds it missing: the recovery rebuilds it.
  const rid = homedOn(coupon, 0, 'r');
  expect((await a.client.deduct({ couponId: id, requestId: rid, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
  // Past the move's grace, nothing is left for the sweep to land, and no shard holds negative transit.
  await new Promise((r) => setTimeout(r, 3500));
  const s = await waitFor(
    'no pending move',
    () => shardState(a.app, id),
    (st) => st.pendingMoves === 0,
    10_000,
  );
  expect(s.levels.map((l) => l.inTransit)).toEqual([0, 0]);
  expect(s.available).toBe(TOTAL - 1);
  expect(1 + (await sellOut(id))).toBe(TOTAL);
}

describe('a lost shard with a move out of it', () => {
  it('when the move had not landed, then its units are sold once (from the rebuilt source), never also at the target', async () => {
    await lostSourceAfterMove(false);
  });

  it('when the move had landed, then the rebuilt source keeps no negative transit and the coupon sells exactly its stock', async () => {
    await lostSourceAfterMove(true);
  });
});

describe("a sweep racing the loss of a move's source", () => {
  it("when the sweeper has read a move and its source's slot is then lost whole and recovered, then its late credit is refused and the coupon sells exactly its stock", async () => {
    const id = uniqueId('rms');
    await a.client.createCoupon({ couponId: id, totalStock: BigInt(TOTAL), shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    const [source, target] = [shardRef(coupon, 0), shardRef(coupon, 1)];
    // Step 1 of a move by an instance that then died: 5 units leave shard 0 for shard 1.
    expect(await a.app.store.moveOut(source, 'dead/0>1', 1, 5)).toBe(5);
    // A sweeper reads the move; before its credit reaches shard 1, shard 0's slot loses everything (the moves
    // hash with it) and a Deduct homed there runs the recovery, which gives the move's units to the rebuilt
    // shard 0: no live shard counted them.
    const real = a.app.store;
    const racing: typeof real = Object.create(real);
    let credits = 0;
    racing.credit = async (shard, creditId, quantity, epoch) => {
      if (credits++ === 0) {
        await loseShard(a.app, coupon, 0);
        const r = await a.client.deduct({ couponId: id, requestId: homedOn(coupon, 0, 'r'), quantity: 1n });
        expect(r.outcome).toBe(DeductOutcome.DEDUCTED);
      }
      return real.credit(shard, creditId, quantity, epoch);
    };
    // Shard 1 stays: a reload here would be a bug.
    const noReload = {
      reload: async () => {
        throw new Error('unexpected reload');
      },
    } as unknown as ShardReloader;
    const sweeper = new MoveSweeper(racing, noReload, 0);
    expect(await sweeper.sweepShard(coupon, 0)).toEqual({ done: 0, left: 1 });
    expect(credits).toBe(1);
    // The next pass finds no move left to land, and the credit never landed on shard 1.
    expect(await sweeper.sweepShard(coupon, 0)).toEqual({ done: 0, left: 0 });
    expect(await a.app.redis.zscore(real.keys(target).credits, moveCreditId('dead/0>1'))).toBeNull();
    const s = await shardState(a.app, id);
    expect(s.levels.map((l) => l.inTransit)).toEqual([0, 0]);
    expect(s.available).toBe(TOTAL - 1);
    expect(1 + (await sellOut(id))).toBe(TOTAL);
  });
});
