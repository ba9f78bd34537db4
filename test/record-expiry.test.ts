// Request records live in per-bucket hashes that must expire (lua/includes/buckets.lua): a hash without its
// expiry is memory that is never given back, and nothing else deletes records. These tests write through every
// path that writes records (deduct-7.lua, shard-batch-8.lua, compensate-6.lua, node-batch-1.lua through the
// service), across bucket boundaries and a lost and re-created shard, and check every record hash there is
// against the expiry of its bucket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import type { ShardRef } from '../src/domain/ports.js';
import { allShards } from '../src/domain/routing.js';
import { Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_ACK_LEVEL: 'replica' });
});
afterAll(async () => {
  await a?.close();
});

const WINDOW_S = 4;
const input = (requestId: string) => ({ requestId, userId: `u-${requestId}`, quantity: 1, perUserLimit: 0 });

async function serverBucket(windowS: number): Promise<number> {
  return Math.floor(Number((await a.app.redis.time())[0]) / windowS);
}

async function crossBoundary(): Promise<void> {
  const start = await serverBucket(WINDOW_S);
  while ((await serverBucket(WINDOW_S)) === start) await new Promise((r) => setTimeout(r, 50));
}

/** Each record hash of the shard in buckets around now: its bucket, and its expiry against the one it must have. */
async function recordHashes(scripts: Scripts, shard: ShardRef, windowS: number) {
  const now = await serverBucket(windowS);
  const out: { bucket: number; expiresAt: number; want: number }[] = [];
  for (let b = now - 3; b <= now + 1; b++) {
    const key = scripts.keys(shard).records(b);
    if ((await a.app.redis.exists(key)) === 0) continue;
    out.push({ bucket: b, expiresAt: Number(await a.app.redis.call('EXPIRETIME', key)), want: (b + 2) * windowS + 60 });
  }
  return out;
}

function expectAllExpire(hashes: { bucket: number; expiresAt: number; want: number }[]) {
  expect(hashes.length).toBeGreaterThan(0);
  for (const h of hashes) expect(h.expiresAt, `record hash of bucket ${h.bucket}`).toBe(h.want);
}

async function newShard(stock: number) {
  const scripts = new Scripts(a.app.redis, a.namespace, WINDOW_S);
  const id = uniqueId();
  const shard = { couponId: id, index: 0, tag: `${id}#0.0` };
  await scripts.shardInit(shard, stock, 0);
  return { scripts, shard };
}

describe('record hashes expire', () => {
  it('when records are written by single calls and by batches, within a bucket and across boundaries, then every record hash carries its bucket expiry', async () => {
    const { scripts, shard } = await newShard(100);
    for (let round = 0; round < 3; round++) {
      expect((await scripts.deduct(shard, input(`s${round}`), [], '', 1)).kind).toBe('deducted');
      const ops = Array.from({ length: 5 }, (_, i) => ({ op: 'D' as const, input: input(`b${round}.${i}`) }));
      const replies = await scripts.shardBatch(shard, ops, false);
      expect(replies.every((r) => !(r instanceof Error) && r.kind === 'deducted')).toBe(true);
      // A compensation of a record made in this bucket, and (from the second round) of one from the bucket before.
      expect((await scripts.compensate(shard, `b${round}.0`, 'refund', false)).kind).toBe('compensated');
      if (round > 0) expect((await scripts.compensate(shard, `b${round - 1}.1`, 'refund', false)).kind).toBe('compensated');
      expectAllExpire(await recordHashes(scripts, shard, WINDOW_S));
      if (round < 2) await crossBoundary();
    }
    // Three buckets were written, each hash with its own expiry.
    expect((await recordHashes(scripts, shard, WINDOW_S)).length).toBe(3);
  });

  it('when a shard is lost with its records and created again, then its new record hash gets its expiry again', async () => {
    const { scripts, shard } = await newShard(10);
    expect((await scripts.deduct(shard, input('before'), [], '', 1)).kind).toBe('deducted');
    const k = scripts.keys(shard);
    const bucket = await serverBucket(WINDOW_S);
    // As a flushed master loses them: every key of the shard's slot.
    await a.app.redis.del(k.shard, k.records(bucket - 1), k.records(bucket), k.records(bucket + 1), k.outbox);
    await scripts.shardInit(shard, 10, 0);
    const replies = await scripts.shardBatch(shard, [{ op: 'D', input: input('after') }], false);
    expect(replies.map((r) => (r instanceof Error ? r.message : r.kind))).toEqual(['deducted']);
    expectAllExpire(await recordHashes(scripts, shard, WINDOW_S));
  });

  it('when the service sells a coupon through its group commit (one call per master), then every record hash of every shard carries its expiry', async () => {
    const couponId = uniqueId();
    await a.client.createCoupon({ couponId, totalStock: 400n, shardCount: 8 });
    const answers = await Promise.all(
      Array.from({ length: 300 }, (_, i) => a.client.deduct({ couponId, requestId: `${couponId}-${i}`, userId: `u${i}`, quantity: 1n })),
    );
    expect(answers.every((r) => r.outcome === DeductOutcome.DEDUCTED)).toBe(true);
    const window = a.app.config.idempotencyWindowS;
    const scripts = new Scripts(a.app.redis, a.namespace, window);
    const coupon = (await a.app.repo.find(couponId))!;
    let hashes = 0;
    for (const shard of allShards(coupon)) {
      const found = await recordHashes(scripts, shard, window);
      hashes += found.length;
      for (const h of found) expect(h.expiresAt).toBe(h.want);
    }
    expect(hashes).toBeGreaterThanOrEqual(8);
  });
});
