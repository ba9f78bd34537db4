// Attack on the per-user limit through holds: Deducts and Reserves of one user racing over a coupon whose home
// shard is too small (so they fall back to other shards), units coming back by Release, expiry and a partial
// Confirm, and a partial Confirm retried with another quantity. The user never holds + owns more than the limit,
// and exactly the limit is reachable again after each give-back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { ConfirmOutcome, DeductOutcome, ReleaseOutcome, ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled, waitFor } from './support/settlement.js';
import { rejection } from './support/rejection.js';

let a: TestApp;
let b: TestApp;
const ENV = { SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_HOLD_SWEEP_MS: '50', SHARDSTOCK_HOLD_TTL_MIN_MS: '100' };
beforeAll(async () => {
  a = await startTestApp({ ...ENV, SHARDSTOCK_INSTANCE_ID: 'atk-lim-a' });
  b = await startTestApp({ ...ENV, SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_INSTANCE_ID: 'atk-lim-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

describe('attack: per-user limit through holds', () => {
  it('when one user races Deducts and Reserves past the limit with fallbacks, then exactly the limit is taken; each give-back (release, expiry, partial confirm, compensate) frees exactly its units', async () => {
    const couponId = uniqueId('ahm');
    const LIMIT = 5;
    // 3 units per shard: the user's home shard alone cannot serve the limit, so fallbacks happen.
    await a.client.createCoupon({ couponId, totalStock: 12n, shardCount: 4, perUserLimit: LIMIT });
    const u = 'lim-user';
    const calls = Array.from({ length: 12 }, (_, i) => {
      const c = i % 2 ? a : b;
      return i % 3 === 0
        ? c.client
            .deduct({ couponId, requestId: `d${i}`, userId: u, quantity: 1n })
            .then((r) => (r.outcome === DeductOutcome.DEDUCTED ? `d${i}` : null))
        : c.client
            .reserve({ couponId, requestId: `r${i}`, userId: u, quantity: 1n, ttlMs: i % 3 === 1 ? 60_000 : 600 })
            .then((r) => (r.outcome === ReserveOutcome.HELD ? r.hold!.holdId : null));
    });
    const won = (await Promise.all(calls)).filter((x): x is string => x !== null);
    expect(won).toHaveLength(LIMIT);
    let level = (await a.client.getStock({ couponId })).level!;
    expect(level.held + level.deducted).toBe(BigInt(LIMIT));
    const over = await a.client.reserve({ couponId, requestId: 'over1', userId: u, quantity: 1n, ttlMs: 60_000 });
    expect(over.outcome).toBe(ReserveOutcome.USER_LIMIT_EXCEEDED);

    // The short holds expire: their units come back to the user's allowance, exactly.
    const deducted = won.filter((w) => w.startsWith('d'));
    const holds = won.filter((w) => !w.startsWith('d'));
    const short = holds.filter((h) => Number(/\/r(\d+)$/.exec(h)![1]) % 3 === 2);
    const long = holds.filter((h) => !short.includes(h));
    await waitFor(
      'short holds expired',
      () => a.client.getStock({ couponId }),
      (r) => r.level!.held === BigInt(long.length),
      10_000,
      50,
    );
    // Free now: LIMIT - deducted - long held.
    let free = LIMIT - deducted.length - long.length;
    expect(free).toBe(short.length);
    if (free > 0) {
      const fill = await b.client.deduct({ couponId, requestId: 'fill1', userId: u, quantity: BigInt(free) });
      expect(fill.outcome).toBe(DeductOutcome.DEDUCTED);
    }
    expect((await a.client.deduct({ couponId, requestId: 'over2', userId: u, quantity: 1n })).outcome).toBe(
      DeductOutcome.USER_LIMIT_EXCEEDED,
    );
    // Bring it back to a known state: release all long holds but one (two Releases each, from both instances).
    const keep = long[0];
    for (const h of long.slice(1)) {
      const rs = await Promise.all([a, b].map((t) => t.client.release({ target: { case: 'holdId', value: h } })));
      expect(rs.map((r) => r.outcome).sort()).toEqual([ReleaseOutcome.RELEASED, ReleaseOutcome.ALREADY_RELEASED]);
    }
    free = long.length - 1;
    if (keep) {
      // A one-unit hold confirmed: keep 1 (a partial confirm of 1 of 1 is the whole). A retry asking for 2 is refused.
      const c1 = await a.client.confirm({ target: { case: 'holdId', value: keep }, quantity: 1n });
      expect(c1.outcome).toBe(ConfirmOutcome.CONFIRMED);
      const bad = await rejection(b.client.confirm({ target: { case: 'holdId', value: keep }, quantity: 2n }));
      expect([bad?.code, bad?.details]).toEqual([status.FAILED_PRECONDITION, expect.stringContaining('quantity')]);
    }
    // Exactly `free` more units fit, then the limit holds again.
    if (free > 0)
      expect((await a.client.deduct({ couponId, requestId: 'fill2', userId: u, quantity: BigInt(free) })).outcome).toBe(
        DeductOutcome.DEDUCTED,
      );
    expect((await b.client.deduct({ couponId, requestId: 'over3', userId: u, quantity: 1n })).outcome).toBe(
      DeductOutcome.USER_LIMIT_EXCEEDED,
    );
    // Compensate the confirmed hold twice at once: one unit back to the user, once.
    if (keep) {
      const cs = await Promise.all([a, b].map((t) => t.client.compensate({ couponId, requestId: keep.split('/')[2]!, reason: 'refund' })));
      expect(cs.map((c) => c.outcome).sort()).toEqual([1, 2]);
      expect((await a.client.deduct({ couponId, requestId: 'fill3', userId: u, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
      expect((await b.client.deduct({ couponId, requestId: 'over4', userId: u, quantity: 1n })).outcome).toBe(
        DeductOutcome.USER_LIMIT_EXCEEDED,
      );
    }
    level = (await a.client.getStock({ couponId })).level!;
    expect([level.held, level.deducted, level.available]).toEqual([0n, BigInt(LIMIT), BigInt(12 - LIMIT)]);
    const rec = await settled(a.client, couponId);
    const fig = await ledgerFigures(a.app, couponId);
    expect([fig.deductUnits - fig.compensateUnits, fig.duplicates, fig.remaining]).toEqual([LIMIT, 0, 12 - LIMIT]);
    expect([rec.consistent, rec.redisDrift]).toEqual([true, 0n]);
  }, 30_000);
});
