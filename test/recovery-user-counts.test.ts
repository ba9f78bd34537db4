// A rebuilt shard's per-user counts come from the ledger plus the events still in flight. An event can be both:
// settled, yet still in the outbox (the relay published it and died before deleting it) or in the stream (not
// yet removed). Counted twice, a settled compensation lowered its buyer's count a second time, and the buyer
// could buy past the per-user limit after the rebuild (a storm of 24 buyers with limit 20 ended with one at 21).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { firstBucket } from '../src/redis/keys.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { waitFor } from './support/settlement.js';

let settler: TestApp | undefined;
let b: TestApp;
beforeAll(async () => {
  settler = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
  b = await startTestApp({ SHARDSTOCK_NAMESPACE: settler.namespace, SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await b?.close();
  await settler?.close();
});

describe("a rebuilt shard's user counts", () => {
  it('when a settled compensation is still in the outbox at the rebuild, then it is counted once: the buyer can still buy only up to the limit', async () => {
    const id = uniqueId('ruc');
    // Sold through the instance that settles, so that its relay serves the coupon at once.
    const s = settler!;
    await s.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2, perUserLimit: 2 });
    const coupon = (await b.app.repo.find(id))!;
    const deductOn = (t: TestApp, requestId: string) => t.client.deduct({ couponId: id, requestId, userId: 'u1', quantity: 1n });
    // u1 bought 2 (the limit) and gave 1 back: 1 held, 1 more allowed.
    expect((await deductOn(s, 'r1')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await deductOn(s, 'r2')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await s.client.compensate({ couponId: id, requestId: 'r1', reason: 'x' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    await waitFor(
      'settlement',
      () => b.client.reconcile({ couponId: id }),
      (r) => r.consistent && r.ledgerDeducted === 2n && r.ledgerCompensated === 1n && r.outboxEvents === 0n && r.jetstreamPending === 0n,
      20_000,
    );
    await settler!.close();
    settler = undefined;

    // The compensation's outbox entry again, as a relay that published it and died before deleting it leaves it.
    const home = homeShard(coupon, '', 'u1');
    const k = b.app.store.keys(shardRef(coupon, home));
    await b.app.redis.xadd(k.outbox, '*', 'c', id, 's', String(home), 't', String(Date.now()), 'C', 'r1|u1|1|x');
    // The buyer's shard loses everything but that outbox; a repair rebuilds it.
    const bucket = firstBucket(Date.now(), b.app.config.idempotencyWindowS);
    const gone = [k.shard, k.users, k.holds, k.moves, k.credits, k.ack];
    for (let n = -3; n <= 3; n++) gone.push(k.records(bucket + n), k.claims(bucket + n));
    for (const key of gone) await b.app.redis.del(key);
    expect((await b.client.reconcile({ couponId: id, repair: true })).repair!.rebuiltShards).toEqual([home]);

    const outcomes = [];
    for (const rid of ['r3', 'r4', 'r5']) outcomes.push(DeductOutcome[(await deductOn(b, rid)).outcome]);
    expect({ outcomes, count: await b.app.redis.hget(k.users, 'u1') }).toEqual({
      outcomes: ['DEDUCTED', 'USER_LIMIT_EXCEEDED', 'USER_LIMIT_EXCEEDED'],
      count: '2',
    });
  });
});
