// A coupon paused by a recovery (a repair after an oversold refusal, a lost shard being rebuilt) must not send
// Deduct's or Compensate's callers into a retry for a pause of milliseconds: both wait it out up to
// PAUSE_PATIENCE_MS, then answer UNAVAILABLE with a retry-after and change nothing. Compensate used to refuse
// at once, which made a refund made right after a repair fail in CI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Metadata, status } from '@grpc/grpc-js';
import type { RedisRecoveryStore } from '../src/redis/recovery-store.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { PAUSE_PATIENCE_MS } from '../src/domain/pause-patience.js';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await a?.close();
});

function recoveryStore(): RedisRecoveryStore {
  return (a.app.settlement.recovery as unknown as { d: { store: RedisRecoveryStore } }).d.store;
}

async function oneShardCoupon(stock: number) {
  const id = uniqueId('pw');
  await a.client.createCoupon({ couponId: id, totalStock: BigInt(stock), shardCount: 1 });
  const coupon = (await a.app.repo.find(id))!;
  return { id, ref: shardRef(coupon, homeShard(coupon, 'any', '')) };
}

/** The gRPC status and trailers of a call that failed, or null when it answered. */
async function failure(call: () => Promise<unknown>): Promise<{ code: number; details: string; trailers?: Metadata } | null> {
  try {
    await call();
    return null;
  } catch (err) {
    const e = err as { code: number; details: string; metadata?: Metadata };
    return { code: e.code, details: e.details, trailers: e.metadata };
  }
}

describe('calls on a coupon paused by a recovery', () => {
  it('when the pause ends within the patience, then Compensate and Deduct wait and answer as if there had been none', async () => {
    const { id, ref } = await oneShardCoupon(10);
    expect((await a.client.deduct({ couponId: id, requestId: 'r1', quantity: 3n })).outcome).toBe(DeductOutcome.DEDUCTED);

    const token = `test-${Date.now()}`;
    expect((await recoveryStore().pause(ref, token, 5_000, 'new')).kind).toBe('paused');
    const lift = setTimeout(() => void recoveryStore().resume(ref, token), 200);
    const started = Date.now();
    const [comp, next] = await Promise.all([
      a.client.compensate({ couponId: id, requestId: 'r1', reason: 'during a pause' }),
      a.client.deduct({ couponId: id, requestId: 'r2', quantity: 2n }),
    ]);
    clearTimeout(lift);
    // They waited for the resume, not answered around it.
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(comp.outcome).toBe(CompensateOutcome.COMPENSATED);
    expect(next.outcome).toBe(DeductOutcome.DEDUCTED);
    const s = await shardState(a.app, id);
    expect(s.net).toBe(2);
    expect(s.available).toBe(8);
  });

  it('when the pause outlasts the patience, then both answer UNAVAILABLE with a retry-after, nothing changed, and the retry with the same request_id succeeds once it ends', async () => {
    const { id, ref } = await oneShardCoupon(10);
    expect((await a.client.deduct({ couponId: id, requestId: 'r1', quantity: 3n })).outcome).toBe(DeductOutcome.DEDUCTED);

    const token = `test-${Date.now()}`;
    expect((await recoveryStore().pause(ref, token, 10_000, 'new')).kind).toBe('paused');
    try {
      const started = Date.now();
      const [comp, next] = await Promise.all([
        failure(() => a.client.compensate({ couponId: id, requestId: 'r1', reason: 'during a pause' })),
        failure(() => a.client.deduct({ couponId: id, requestId: 'r2', quantity: 2n })),
      ]);
      const waited = Date.now() - started;
      for (const f of [comp, next]) {
        expect(f?.code).toBe(status.UNAVAILABLE);
        expect(f?.details).toContain(`coupon ${id} is paused while its stock is recovered`);
        expect(Number(f?.trailers?.get('retry-after-ms')[0])).toBeGreaterThan(0);
      }
      expect(waited).toBeGreaterThanOrEqual(PAUSE_PATIENCE_MS - 50);
      // Neither touched the shard: the 3 units are still deducted and the refund is not applied.
      const s = await shardState(a.app, id);
      expect(s.net).toBe(3);
      expect(s.available).toBe(7);
    } finally {
      await recoveryStore().resume(ref, token);
    }
    expect((await a.client.compensate({ couponId: id, requestId: 'r1', reason: 'retried' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    expect((await a.client.deduct({ couponId: id, requestId: 'r2', quantity: 2n })).outcome).toBe(DeductOutcome.DEDUCTED);
    const s = await shardState(a.app, id);
    expect(s.net).toBe(2);
    expect(s.available).toBe(8);
  });
});
