// The sold-out fast path against units coming back on ANOTHER instance. Instance A's Deduct reads every shard
// empty, and before it marks the coupon sold out, instance B compensates a deduction (or restocks) and A hears
// B's signal: the signal finds nothing to clear, and A's mark, made after it, would refuse the returned units
// from memory for the whole flag TTL (SHARDSTOCK_SOLD_OUT_TTL_MS, up to 10 minutes).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { sleep, waitFor } from './support/settlement.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  // A long flag TTL: the stale flag's effect is measured, not hidden by a quick expiry.
  a = await startTestApp({ SHARDSTOCK_SOLD_OUT_TTL_MS: '60000' });
  b = await startTestApp({ SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_SOLD_OUT_TTL_MS: '60000' });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** Holds back the answers of A's shard reads (HMGETs of the shard hashes) from the `from`-th on, until released:
 * those reads are made at once, so they see the coupon as it was, and A acts on them only later. A sell-out is
 * declared on a second probe that agrees with the first, so the held reads are the second probe's. */
function delayProbeAnswers(app: TestApp, from: number) {
  const redis = app.app.redis as unknown as { hmget: (...args: unknown[]) => Promise<unknown> };
  const original = redis.hmget;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let seen = 0;
  redis.hmget = async (...args: unknown[]) => {
    const r = await original.apply(app.app.redis, args);
    if (seen++ >= from) await gate;
    return r;
  };
  return {
    seen: () => seen,
    release() {
      redis.hmget = original;
      release();
    },
  };
}

describe('sold-out flag against units returned on another instance', () => {
  for (const how of ['compensate', 'restock'] as const) {
    it(`when B's ${how} lands while A is deciding the coupon is sold out, then A still sells the returned unit`, async () => {
      const id = uniqueId();
      await a.client.createCoupon({ couponId: id, totalStock: 2n, shardCount: 2, perUserLimit: 0 });
      expect((await b.app.deduct.deduct({ couponId: id, requestId: 'r1', userId: '', quantity: 1n })).outcome).toBe('deducted');
      expect((await b.app.deduct.deduct({ couponId: id, requestId: 'r2', userId: '', quantity: 1n })).outcome).toBe('deducted');

      // 2 shards: the first probe's two reads answer, the second probe's two wait.
      const held = delayProbeAnswers(a, 2);
      const late = a.app.deduct.deduct({ couponId: id, requestId: 'late', userId: '', quantity: 1n });
      await waitFor(
        'A to read the shards twice',
        async () => held.seen(),
        (n) => n >= 4,
        5000,
        5,
      );
      if (how === 'compensate') await b.client.compensate({ couponId: id, requestId: 'r1', reason: 'returned' });
      else await b.client.restock({ couponId: id, requestId: 'restock-1', quantity: 1n });
      // B's signal reaches A (NATS core, same machine) well within this.
      await sleep(300);
      held.release();
      // Read before the unit came back: an honest SOLD_OUT for this call.
      expect((await late).outcome).toBe('sold_out');

      const after = await a.app.deduct.deduct({ couponId: id, requestId: 'after', userId: '', quantity: 1n });
      expect(after.outcome).toBe('deducted');
    });
  }
});
