// `replica` acknowledgement really waits for a replica: with the shard's only replica frozen (SIGSTOP) a
// Deduct cannot be answered DEDUCTED, and an answered one is already readable on the replica.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import slotOf from 'cluster-key-slot';
import { status, type ServiceError } from '@grpc/grpc-js';
import { CompensateOutcome, ConfirmOutcome, DeductOutcome, ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { shardRef } from '../src/domain/routing.js';
import type { ShardKeys } from '../src/redis/keys.js';
import { bucketField } from '../test/support/bucket-fields.js';
import { startTestApp, uniqueId, type TestApp } from '../test/support/harness.js';
import { OwnCluster, type NodeInfo } from './support/own-cluster.js';

let cluster: OwnCluster;
let replicaApp: TestApp;
let leaderApp: TestApp;
/** A second `replica`-level instance, answering for writes another instance made. */
let otherApp: TestApp;

beforeAll(async () => {
  cluster = await OwnCluster.start(7101);
  replicaApp = await startTestApp({
    SHARDSTOCK_REDIS_NODES: cluster.seeds,
    SHARDSTOCK_ACK_LEVEL: 'replica',
    SHARDSTOCK_WAIT_TIMEOUT_MS: '300',
  });
  leaderApp = await startTestApp({
    SHARDSTOCK_REDIS_NODES: cluster.seeds,
    SHARDSTOCK_ACK_LEVEL: 'leader',
    SHARDSTOCK_NAMESPACE: replicaApp.namespace,
  });
  otherApp = await startTestApp({
    SHARDSTOCK_REDIS_NODES: cluster.seeds,
    SHARDSTOCK_ACK_LEVEL: 'replica',
    SHARDSTOCK_WAIT_TIMEOUT_MS: '300',
    SHARDSTOCK_SOLD_OUT_TTL_MS: '60000',
    SHARDSTOCK_NAMESPACE: replicaApp.namespace,
  });
});

afterAll(async () => {
  await otherApp?.close();
  await replicaApp?.close();
  await leaderApp?.close();
  cluster?.stop();
});

/** A one-shard coupon and where its shard lives. */
async function oneShardCoupon(stock: number) {
  const couponId = uniqueId();
  await replicaApp.client.createCoupon({ couponId, totalStock: BigInt(stock), shardCount: 1 });
  const coupon = (await replicaApp.app.repo.find(couponId))!;
  const keys = replicaApp.app.store.keys(shardRef(coupon, 0));
  const master = await cluster.masterOfSlot(slotOf(keys.shard));
  const replicas = await cluster.replicasOf(master);
  expect(replicas).toHaveLength(1);
  return { couponId, keys, master, replica: replicas[0]! };
}

async function onReplica<T>(replica: NodeInfo, read: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ port: replica.port, host: '127.0.0.1', lazyConnect: true });
  try {
    await r.connect();
    await r.call('READONLY');
    return await read(r);
  } finally {
    r.disconnect();
  }
}

const readOnReplica = (replica: NodeInfo, key: string, field: string) => onReplica(replica, (r) => r.hget(key, field));

/** A request's record as the replica holds it ("q|r|t|flags|u"), null when it has none. */
const recordOnReplica = (replica: NodeInfo, keys: ShardKeys, requestId: string) =>
  onReplica(replica, (r) => bucketField(r, keys, 'records', replicaApp.app.config.idempotencyWindowS, requestId));

const frozen = async <T>(node: NodeInfo, run: () => Promise<T>): Promise<T> => {
  cluster.signal(node.port, 'SIGSTOP');
  try {
    return await run();
  } finally {
    cluster.signal(node.port, 'SIGCONT');
  }
};

describe('replica acknowledgement (WAIT on the owning master)', () => {
  it('when a replica-level Deduct is answered DEDUCTED, then its record and decrement are already on the replica', async () => {
    const { couponId, keys, replica } = await oneShardCoupon(100);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => replicaApp.client.deduct({ couponId, requestId: `r${i}`, quantity: 1n })),
    );
    expect(answers.every((a) => a.outcome === DeductOutcome.DEDUCTED)).toBe(true);
    // Read straight after the answers, from the replica itself: nothing may be missing.
    expect(await readOnReplica(replica, keys.shard, 'avail')).toBe('50');
    for (let i = 0; i < 50; i += 7) expect((await recordOnReplica(replica, keys, `r${i}`))?.split('|')[0]).toBe('1');
  });

  it('when replica-level Reserves are answered HELD and Confirms CONFIRMED, then the holds, their expiry entries and the confirmations are already on the replica', async () => {
    const { couponId, keys, replica } = await oneShardCoupon(100);
    const held = await Promise.all(
      Array.from({ length: 20 }, (_, i) => replicaApp.client.reserve({ couponId, requestId: `h${i}`, quantity: 2n, ttlMs: 600_000 })),
    );
    expect(held.every((h) => h.outcome === ReserveOutcome.HELD)).toBe(true);
    // What a promoted replica would serve: the held units out of avail, each hold open with its expiry.
    expect([await readOnReplica(replica, keys.shard, 'avail'), await readOnReplica(replica, keys.shard, 'held')]).toEqual(['60', '40']);
    for (let i = 0; i < 20; i += 3) expect((await recordOnReplica(replica, keys, `h${i}`))?.slice(0, 2)).toBe('hh');
    const confirmed = await Promise.all(
      held.slice(0, 10).map((h) => replicaApp.client.confirm({ target: { case: 'holdId', value: h.hold!.holdId } })),
    );
    expect(confirmed.every((c) => c.outcome === ConfirmOutcome.CONFIRMED)).toBe(true);
    expect([await readOnReplica(replica, keys.shard, 'net'), await readOnReplica(replica, keys.shard, 'held')]).toEqual(['20', '20']);
    // Each confirmed hold is a deduction's record of its 2 units (flag 'h').
    for (let i = 0; i < 10; i += 3) expect((await recordOnReplica(replica, keys, `h${i}`))?.split('|').slice(0, 1)).toEqual(['2']);
  });

  it("when the shard's only replica is frozen, then a replica-level Reserve fails UNAVAILABLE, and its retry after the replica is back answers the one hold", async () => {
    const { couponId, replica } = await oneShardCoupon(10);
    const err = await frozen(replica, () =>
      replicaApp.client.reserve({ couponId, requestId: 'hold-in-doubt', quantity: 3n, ttlMs: 600_000 }).then(
        () => null,
        (e: ServiceError) => e,
      ),
    );
    expect(err?.code).toBe(status.UNAVAILABLE);
    await cluster.waitHealthy();
    const retry = await replicaApp.client.reserve({ couponId, requestId: 'hold-in-doubt', quantity: 3n, ttlMs: 600_000 });
    expect([retry.outcome, retry.replayed]).toEqual([ReserveOutcome.HELD, true]);
    const level = (await replicaApp.client.getStock({ couponId })).level!;
    expect([level.available, level.held]).toEqual([7n, 3n]);
  });

  it("when the shard's only replica is frozen, then a replica-level Deduct fails UNAVAILABLE, and its retry with the same request_id after the replica is back is DEDUCTED once", async () => {
    const { couponId, replica } = await oneShardCoupon(10);
    const err = await frozen(replica, () =>
      replicaApp.client.deduct({ couponId, requestId: 'in-doubt', quantity: 2n }).then(
        () => null,
        (e: ServiceError) => e,
      ),
    );
    expect(err?.code).toBe(status.UNAVAILABLE);
    await cluster.waitHealthy();
    const retry = await replicaApp.client.deduct({ couponId, requestId: 'in-doubt', quantity: 2n });
    // The write had happened on the master; only its acknowledgement was missing: the retry is a replay.
    expect(retry.outcome).toBe(DeductOutcome.DEDUCTED);
    expect(retry.replayed).toBe(true);
    expect((await replicaApp.client.getStock({ couponId })).level?.available).toBe(8n);
  });

  it('when the same replica is frozen, then a leader-level Deduct is answered DEDUCTED without waiting while a replica-level one waits out the WAIT timeout and fails UNAVAILABLE', async () => {
    const { couponId, replica } = await oneShardCoupon(10);
    const timed = async <T>(call: () => Promise<T>) => {
      const t0 = performance.now();
      const result = await call().catch((e: ServiceError) => e);
      return { result, ms: performance.now() - t0 };
    };
    const [leader, replicaLevel] = await frozen(replica, async () => [
      await timed(() => leaderApp.client.deduct({ couponId, requestId: 'fast', quantity: 1n }, { deadlineMs: 5000 })),
      await timed(() => replicaApp.client.deduct({ couponId, requestId: 'slow', quantity: 1n }, { deadlineMs: 5000 })),
    ]);
    expect((leader.result as { outcome: DeductOutcome }).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((replicaLevel.result as ServiceError).code).toBe(status.UNAVAILABLE);
    // SHARDSTOCK_WAIT_TIMEOUT_MS is 300: the replica level waited for it, the leader level did not.
    expect(replicaLevel.ms).toBeGreaterThanOrEqual(290);
    expect(leader.ms).toBeLessThan(replicaLevel.ms);
    console.log('[faults] frozen replica:', JSON.stringify({ leaderMs: Math.round(leader.ms), replicaMs: Math.round(replicaLevel.ms) }));
    await cluster.waitHealthy();
  });

  it('when SHARDSTOCK_ACK_REPLICAS asks for more replicas than a master has, then no Deduct is acknowledged', async () => {
    const strict = await startTestApp({
      SHARDSTOCK_REDIS_NODES: cluster.seeds,
      SHARDSTOCK_ACK_REPLICAS: '2',
      SHARDSTOCK_WAIT_TIMEOUT_MS: '100',
      SHARDSTOCK_NAMESPACE: replicaApp.namespace,
    });
    try {
      const { couponId } = await oneShardCoupon(10);
      const err = await strict.client.deduct({ couponId, requestId: 'two', quantity: 1n }).then(
        () => null,
        (e: ServiceError) => e,
      );
      expect(err?.code).toBe(status.UNAVAILABLE);
      expect(err?.details).toMatch(/cannot be reached|replica/);
    } finally {
      await strict.close();
    }
  });

  it('when the replica is frozen, then a replica-level Compensate fails UNAVAILABLE and its retry compensates once', async () => {
    const { couponId, replica } = await oneShardCoupon(10);
    await replicaApp.client.deduct({ couponId, requestId: 'c1', quantity: 3n });
    const err = await frozen(replica, () =>
      replicaApp.client.compensate({ couponId, requestId: 'c1', reason: 'test' }).then(
        () => null,
        (e: ServiceError) => e,
      ),
    );
    expect(err?.code).toBe(status.UNAVAILABLE);
    await cluster.waitHealthy();
    const again = await replicaApp.client.compensate({ couponId, requestId: 'c1', reason: 'test' });
    // The give-back was written before the WAIT failed: the retry finds it done.
    expect(again.outcome).toBe(CompensateOutcome.ALREADY_COMPENSATED);
    expect((await replicaApp.client.getStock({ couponId })).level?.available).toBe(10n);
  });
});

// An answer that vouches for an earlier write but writes nothing itself is covered only if the WAIT behind it
// counts that write. From Redis 7.2 a WAIT counts up to its connection's last write: on another instance, whose
// last write on that master came before the one vouched for, it would return at once while the replica still
// lacks that write (Redis 7.0, as installed here, also counts reads, so there these tests pass either way; they
// pin the behaviour the store's same-slot write guarantees on both). The replica is only frozen (its link stays
// up), so the master keeps counting it at the offset it had acknowledged.
describe('answers that vouch for an earlier write, given by another instance', () => {
  const failed = (p: Promise<unknown>) =>
    p.then(
      (r) => r,
      (e: ServiceError) => e.code,
    );
  /** The other instance's last write on the shard's master, acknowledged before the replica is frozen. */
  const warmUp = async (couponId: string) =>
    expect((await otherApp.client.deduct({ couponId, requestId: 'warm', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);

  it('when the replica lags behind a deduction, then a replay on another instance is not DEDUCTED until the replica has it', async () => {
    const { couponId, keys, replica } = await oneShardCoupon(10);
    await warmUp(couponId);
    const [first, replay] = await frozen(replica, async () => [
      await failed(replicaApp.client.deduct({ couponId, requestId: 'v', quantity: 2n })),
      await failed(otherApp.client.deduct({ couponId, requestId: 'v', quantity: 2n })),
    ]);
    // The first call wrote on the master, and its WAIT timed out; the replay must not vouch for that write.
    expect([first, replay]).toEqual([status.UNAVAILABLE, status.UNAVAILABLE]);
    await cluster.waitHealthy();
    const again = await otherApp.client.deduct({ couponId, requestId: 'v', quantity: 2n });
    expect(again).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });
    expect((await recordOnReplica(replica, keys, 'v'))?.split('|')[0]).toBe('2');
    expect((await otherApp.client.getStock({ couponId })).level?.available).toBe(7n);
  });

  it("when the replica lags behind the deduction that sold a coupon out, then the sold-out fast path's replay on another instance is not DEDUCTED until the replica has it", async () => {
    const { couponId, keys, replica } = await oneShardCoupon(2);
    await warmUp(couponId);
    const fastBefore = otherApp.app.deduct.stats.soldOutFastPath;
    const [first, soldOut, replay] = await frozen(replica, async () => [
      await failed(replicaApp.client.deduct({ couponId, requestId: 'last', quantity: 1n })),
      // Teaches the other instance that the coupon is sold out (a refusal vouches for nothing).
      await failed(otherApp.client.deduct({ couponId, requestId: 'late', quantity: 1n }).then((r) => r.outcome)),
      await failed(otherApp.client.deduct({ couponId, requestId: 'last', quantity: 1n })),
    ]);
    expect([first, soldOut, replay]).toEqual([status.UNAVAILABLE, DeductOutcome.SOLD_OUT, status.UNAVAILABLE]);
    expect(otherApp.app.deduct.stats.soldOutFastPath).toBe(fastBefore + 1);
    await cluster.waitHealthy();
    const again = await otherApp.client.deduct({ couponId, requestId: 'last', quantity: 1n });
    expect(again).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });
    expect(otherApp.app.deduct.stats.soldOutFastPath).toBe(fastBefore + 2);
    expect((await recordOnReplica(replica, keys, 'last'))?.split('|')[0]).toBe('1');
  });

  it('when the replica lags behind a compensation, then ALREADY_COMPENSATED on another instance waits until the replica has it', async () => {
    const { couponId, keys, replica } = await oneShardCoupon(10);
    expect((await replicaApp.client.deduct({ couponId, requestId: 'c', quantity: 3n })).outcome).toBe(DeductOutcome.DEDUCTED);
    await warmUp(couponId);
    const [first, again] = await frozen(replica, async () => [
      await failed(replicaApp.client.compensate({ couponId, requestId: 'c', reason: 'test' })),
      await failed(otherApp.client.compensate({ couponId, requestId: 'c', reason: 'test' })),
    ]);
    expect([first, again]).toEqual([status.UNAVAILABLE, status.UNAVAILABLE]);
    await cluster.waitHealthy();
    const after = await otherApp.client.compensate({ couponId, requestId: 'c', reason: 'test' });
    expect(after.outcome).toBe(CompensateOutcome.ALREADY_COMPENSATED);
    expect((await recordOnReplica(replica, keys, 'c'))?.split('|')[3]).toBe('c');
    expect((await otherApp.client.getStock({ couponId })).level?.available).toBe(9n);
  });
});
