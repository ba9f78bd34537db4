// Upgrading in place from the per-request layout: records, claims and user counts an older version wrote are
// folded into the bucketed hashes before the new version serves, so a retry after the upgrade replays instead
// of deducting again and a per-user limit still counts what was bought before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { DeductOutcome, CompensateOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { claimShard, homeShard, shardRef } from '../src/domain/routing.js';
import { layoutMarkerKey } from '../src/redis/keys.js';
import { foldLegacyLayout } from '../src/redis/legacy-fold.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp();
});
afterAll(async () => {
  await a?.close();
});

describe('legacy layout fold', () => {
  it('when legacy record, claim and user keys are live at the upgrade, then after the fold a retry replays, the limit counts them, reuse is caught and the keys are gone', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2, perUserLimit: 3 });
    const coupon = (await a.app.repo.find(id))!;
    const window = a.app.config.idempotencyWindowS;
    // What the old version left: u0 bought 2 units with request "old" (record on u0's home shard, claim on the
    // request's claim shard, count on the home shard), and the shard's stock already reflects it.
    const home = a.app.store.keys(shardRef(coupon, homeShard(coupon, '', 'u0')));
    const claimAt = a.app.store.keys(shardRef(coupon, claimShard(coupon, 'old')));
    const t = Date.now() - 5000;
    await a.app.redis.hset(home.legacy.request('old'), 'u', 'u0', 'q', '2', 'r', '8', 's', '0', 't', String(t));
    await a.app.redis.expire(home.legacy.request('old'), window);
    await a.app.redis.set(claimAt.legacy.claim('old'), 'u0|2', 'EX', window);
    await a.app.redis.set(home.legacy.user('u0'), '2');
    await a.app.redis.hincrby(home.shard, 'avail', -2);
    await a.app.redis.hincrby(home.shard, 'net', 2);
    await a.app.redis.del(layoutMarkerKey(a.namespace));

    const fold = await foldLegacyLayout(a.app.redis, a.namespace, window, 60_000);
    expect(fold).toEqual({ scanned: true, folded: 3 });
    for (const key of [home.legacy.request('old'), claimAt.legacy.claim('old'), home.legacy.user('u0')]) {
      expect(await a.app.redis.exists(key), key).toBe(0);
    }
    expect(await foldLegacyLayout(a.app.redis, a.namespace, window, 60_000)).toEqual({ scanned: false, folded: 0 });

    const retry = await a.client.deduct({ couponId: id, requestId: 'old', userId: 'u0', quantity: 2n });
    expect(retry).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });
    const reuse = await a.client.deduct({ couponId: id, requestId: 'old', userId: 'u9', quantity: 2n }).then(
      () => 0,
      (e: { code: number }) => e.code,
    );
    expect(reuse).toBe(status.FAILED_PRECONDITION);
    expect((await a.client.deduct({ couponId: id, requestId: 'new1', userId: 'u0', quantity: 2n })).outcome).toBe(
      DeductOutcome.USER_LIMIT_EXCEEDED,
    );
    expect((await a.client.deduct({ couponId: id, requestId: 'new2', userId: 'u0', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await a.client.compensate({ couponId: id, requestId: 'old', reason: 'refund' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    expect(await a.app.redis.hget(home.users, 'u0')).toBe('1');
  });
});
