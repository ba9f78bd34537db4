import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { chooseShardTags } from '../src/redis/shard-tags.js';
import slotOf from 'cluster-key-slot';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

const code = (p: Promise<unknown>) =>
  p.then(
    () => 'OK',
    (e: ServiceError) => e.code,
  );

describe('CreateCoupon', () => {
  it('when a coupon is created, then its stock is split evenly over its shards in Redis and recorded in MySQL', async () => {
    const id = uniqueId();
    const r = await t.client.createCoupon({ couponId: id, totalStock: 1003n, shardCount: 8, perUserLimit: 0 });
    expect(r.created).toBe(true);
    expect(r.coupon?.totalStock).toBe(1003n);
    expect(r.coupon?.shardCount).toBe(8);
    const level = (await t.client.getStock({ couponId: id, includeShards: true })).level!;
    expect(level.available).toBe(1003n);
    expect(level.settledRemaining).toBe(1003n);
    expect(level.shards.map((s) => Number(s.available))).toEqual([126, 126, 126, 125, 125, 125, 125, 125]);
    const row = await t.app.repo.find(id);
    expect(row).toMatchObject({ totalStock: 1003, settledRemaining: 1003, shardCount: 8, preheated: true });
  });

  it('when shard_count is 0, then the server default (16) is used', async () => {
    const r = await t.client.createCoupon({ couponId: uniqueId(), totalStock: 7n });
    expect(r.coupon?.shardCount).toBe(16);
  });

  it('when the same definition is sent again, then it is OK and not created twice; a different one is ALREADY_EXISTS', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 4 });
    await t.client.deduct({ couponId: id, requestId: 'r1', quantity: 1n });
    const again = await t.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 4 });
    expect(again.created).toBe(false);
    // The replay did not re-preheat: the deducted unit is still gone.
    expect((await t.client.getStock({ couponId: id })).level?.available).toBe(49n);
    expect(await code(t.client.createCoupon({ couponId: id, totalStock: 51n, shardCount: 4 }))).toBe(status.ALREADY_EXISTS);
    expect(await code(t.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 4, perUserLimit: 1 }))).toBe(
      status.ALREADY_EXISTS,
    );
  });

  it('when tags are chosen from the slot map, then shards spread evenly over the masters', () => {
    const slots = t.app.redis.slots;
    const tags = chooseShardTags('spread-check', 16, slots);
    const perMaster = new Map<string, number>();
    for (const tag of tags) {
      const m = slots[slotOf(tag)]![0]!;
      perMaster.set(m, (perMaster.get(m) ?? 0) + 1);
    }
    expect(perMaster.size).toBe(3);
    expect([...perMaster.values()].sort()).toEqual([5, 5, 6]);
  });
});

describe('Restock', () => {
  it('when a restock is sent twice with one request_id, then the units are added once, to MySQL and to the shards', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 4 });
    const first = await t.client.restock({ couponId: id, quantity: 6n, requestId: 'rs-1' });
    expect(first.replayed).toBe(false);
    expect(first.level?.available).toBe(16n);
    expect(first.level?.totalStock).toBe(16n);
    const second = await t.client.restock({ couponId: id, quantity: 6n, requestId: 'rs-1' });
    expect(second.replayed).toBe(true);
    expect(second.level?.available).toBe(16n);
    expect((await t.app.repo.find(id))?.settledRemaining).toBe(16);
  });

  it('when a restock would lift the total stock above 10^12, then FAILED_PRECONDITION naming quantity, nothing is added, and a replay still answers', async () => {
    const id = uniqueId();
    const CAP = 1_000_000_000_000n;
    await t.client.createCoupon({ couponId: id, totalStock: CAP - 5n, shardCount: 4 });
    const over = t.client.restock({ couponId: id, quantity: 6n, requestId: 'rs-a' });
    await expect(over).rejects.toMatchObject({
      code: status.FAILED_PRECONDITION,
      details: expect.stringMatching(/^quantity: .*1000000000001/),
    });
    // The refused id was not recorded: asked again with a quantity that fits, it is a new restock, not a replay.
    const upToCap = await t.client.restock({ couponId: id, quantity: 5n, requestId: 'rs-a' });
    expect(upToCap).toMatchObject({ replayed: false, level: { totalStock: CAP, available: CAP } });
    // Each call alone is within 1..10^12; without the cap, 9,008 of them would pass 2^53, where doubles lose units.
    const huge = t.client.restock({ couponId: id, quantity: CAP, requestId: 'rs-b' });
    await expect(huge).rejects.toMatchObject({ code: status.FAILED_PRECONDITION });
    const replay = await t.client.restock({ couponId: id, quantity: 5n, requestId: 'rs-a' });
    expect(replay.replayed).toBe(true);
    const rec = await t.client.reconcile({ couponId: id });
    expect(rec).toMatchObject({
      totalStock: CAP,
      ledgerRestocked: 5n,
      settledRemaining: CAP,
      redisAvailable: CAP,
      redisDrift: 0n,
      ledgerDrift: 0n,
    });
  });

  it('when the coupon is unknown, then NOT_FOUND', async () => {
    expect(await code(t.client.restock({ couponId: uniqueId(), quantity: 1n, requestId: 'x' }))).toBe(status.NOT_FOUND);
  });
});

describe('bad input', () => {
  const cases: [string, () => Promise<unknown>, number, RegExp][] = [
    ['empty coupon_id', () => t.client.createCoupon({ couponId: '', totalStock: 1n }), status.INVALID_ARGUMENT, /coupon_id/],
    [
      'over-long coupon_id',
      () => t.client.createCoupon({ couponId: 'x'.repeat(65), totalStock: 1n }),
      status.INVALID_ARGUMENT,
      /coupon_id/,
    ],
    ['coupon_id with braces', () => t.client.createCoupon({ couponId: 'a{b}', totalStock: 1n }), status.INVALID_ARGUMENT, /coupon_id/],
    [
      'negative total_stock',
      () => t.client.createCoupon({ couponId: uniqueId(), totalStock: -1n }),
      status.INVALID_ARGUMENT,
      /total_stock/,
    ],
    [
      'absurd total_stock',
      () => t.client.createCoupon({ couponId: uniqueId(), totalStock: 10n ** 15n }),
      status.INVALID_ARGUMENT,
      /total_stock/,
    ],
    [
      'shard_count 1025',
      () => t.client.createCoupon({ couponId: uniqueId(), totalStock: 1n, shardCount: 1025 }),
      status.INVALID_ARGUMENT,
      /shard_count/,
    ],
    [
      'negative shard_count',
      () => t.client.createCoupon({ couponId: uniqueId(), totalStock: 1n, shardCount: -1 }),
      status.INVALID_ARGUMENT,
      /shard_count/,
    ],
    [
      'negative per_user_limit',
      () => t.client.createCoupon({ couponId: uniqueId(), totalStock: 1n, perUserLimit: -2 }),
      status.INVALID_ARGUMENT,
      /per_user_limit/,
    ],
    ['unknown coupon on GetStock', () => t.client.getStock({ couponId: uniqueId() }), status.NOT_FOUND, /does not exist/],
    ['restock of 0', () => t.client.restock({ couponId: 'x', quantity: 0n, requestId: 'r' }), status.INVALID_ARGUMENT, /quantity/],
    [
      'restock without request_id',
      () => t.client.restock({ couponId: 'x', quantity: 1n, requestId: '' }),
      status.INVALID_ARGUMENT,
      /request_id/,
    ],
  ];
  for (const [name, call, want, message] of cases) {
    it(`when ${name}, then ${want === status.NOT_FOUND ? 'NOT_FOUND' : 'INVALID_ARGUMENT'} naming it`, async () => {
      const err = await call().then(
        () => null,
        (e: ServiceError) => e,
      );
      expect(err?.code).toBe(want);
      expect(err?.details).toMatch(message);
    });
  }
});
