// A coupon's last units are in transit (their mover died after move-out) when a Deduct finds its home shard
// empty and probes the others. The sweeper lands them (credit on the target, then ack at the source) while the
// probe is on its way: the probe must not answer SOLD_OUT, and the instance must not mark the coupon sold out,
// while the units sit on a shard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MoveSweeper } from '../src/domain/move-sweeper.js';
import { shardRef } from '../src/domain/routing.js';
import { noReload } from './support/deduct-setup.js';
import { closeInstances, startInstancePair } from './support/instance-pair.js';
import { uniqueId, type TestApp } from './support/harness.js';
import { requestIdHomedAt } from './support/routing.js';
import { shardState } from './support/inspect.js';
import { waitFor } from './support/settlement.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  [a, b] = await startInstancePair();
});
afterAll(() => closeInstances(b, a));

/** Holds A's HMGETs of the chosen shards' hashes back (before they are sent) until released. */
function holdReads(app: TestApp, keys: string[]) {
  const redis = app.app.redis as unknown as { hmget: (...args: unknown[]) => Promise<unknown> };
  const original = redis.hmget;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let waiting = 0;
  redis.hmget = async (...args: unknown[]) => {
    if (keys.includes(args[0] as string)) {
      waiting++;
      await gate;
    }
    return original.apply(app.app.redis, args);
  };
  return {
    waiting: () => waiting,
    release() {
      redis.hmget = original;
      release();
    },
  };
}

/** A coupon whose only unit sits in transit from shard 0 to `target`, its mover gone. */
async function unitInTransit(shards: number, target: number) {
  const id = uniqueId();
  await a.client.createCoupon({ couponId: id, totalStock: 1n, shardCount: shards, perUserLimit: 0 });
  const coupon = (await a.app.repo.find(id))!;
  expect(await b.app.store.moveOut(shardRef(coupon, 0), 'dead-mover', target, 1)).toBe(1);
  return coupon;
}

describe('sold-out decisions while moves land', () => {
  it('when the unit lands on the home shard between its short answer and the probe, then the Deduct gets it', async () => {
    const coupon = await unitInTransit(2, 1);
    const held = holdReads(a, [a.app.store.keys(shardRef(coupon, 0)).shard, a.app.store.keys(shardRef(coupon, 1)).shard]);
    const call = a.app.deduct.deduct({ couponId: coupon.id, requestId: requestIdHomedAt(coupon, 1, 'h'), userId: '', quantity: 1n });
    await waitFor(
      'the probe to start',
      async () => held.waiting(),
      (n) => n >= 2,
      5000,
      5,
    );
    // B's sweeper lands the dead mover's unit: credited on shard 1 (the caller's home), acknowledged at 0.
    expect(await new MoveSweeper(b.app.store, noReload, 0).sweepShard(coupon, 0)).toEqual({ done: 1, left: 0 });
    held.release();
    expect((await call).outcome).toBe('deducted');
    expect((await shardState(a.app, coupon.id)).available).toBe(0);
  });

  it('when the unit lands on another shard while the probe reads the shards one by one, then the Deduct gets it', async () => {
    const coupon = await unitInTransit(3, 1);
    // The probe reads the target (1) before the unit lands there and the source (0) after it left.
    const held = holdReads(a, [a.app.store.keys(shardRef(coupon, 0)).shard]);
    const call = a.app.deduct.deduct({ couponId: coupon.id, requestId: requestIdHomedAt(coupon, 2, 'o'), userId: '', quantity: 1n });
    await waitFor(
      'the probe to start',
      async () => held.waiting(),
      (n) => n >= 1,
      5000,
      5,
    );
    // Let the target's read finish first.
    await new Promise((r) => setTimeout(r, 50));
    expect(await new MoveSweeper(b.app.store, noReload, 0).sweepShard(coupon, 0)).toEqual({ done: 1, left: 0 });
    held.release();
    expect((await call).outcome).toBe('deducted');
    expect((await shardState(a.app, coupon.id)).available).toBe(0);
  });
});
