// Property: whatever runs against a coupon — deductions of 1–3 units, retries of the same request id,
// compensations, restocks (also retried), shards lost and recovered, several calls at once — units are never
// created nor destroyed: once every move has landed, Σ(avail + transit + net) over the shards equals the
// coupon's total stock, and Redis counts as deducted exactly what the events say (each request at most once).
// Runs over the in-memory fakes of test/support/fakes, which reproduce the Lua scripts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { allShards, shardRef } from '../../src/domain/routing.js';
import { fakeDomain } from '../support/fakes/index.js';

type Op =
  | { kind: 'deduct'; request: number; quantity: number; user: number }
  | { kind: 'compensate'; request: number }
  | { kind: 'restock'; request: number; quantity: number }
  | { kind: 'sweep' };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('deduct' as const),
      request: fc.nat(11),
      quantity: fc.integer({ min: 1, max: 3 }),
      user: fc.nat(2),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('compensate' as const), request: fc.nat(11) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('restock' as const), request: fc.nat(3), quantity: fc.integer({ min: 1, max: 5 }) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sweep' as const) }) },
);

/** Calls run at once within a batch; a shard may be lost before it (and recovered at once, or found missing by the calls). */
const batch = fc.record({
  lose: fc.option(fc.nat(3), { nil: undefined }),
  recoverNow: fc.boolean(),
  ops: fc.array(op, { minLength: 1, maxLength: 4 }),
});

const scenario = fc.record({
  total: fc.integer({ min: 0, max: 14 }),
  shardCount: fc.integer({ min: 1, max: 4 }),
  perUserLimit: fc.constantFrom(0, 0, 3),
  batches: fc.array(batch, { minLength: 1, maxLength: 12 }),
});

/** What a caller may legitimately be told: a reused id, a paused or busy coupon, too much contention. */
const EXPECTED = new Set(['failed_precondition', 'unavailable', 'aborted']);

const settle = () => new Promise<void>((r) => setImmediate(r));

describe('unit conservation over the domain (property)', () => {
  it('when any sequence of deducts, retries, compensations, restocks and shard losses runs, then no unit is created or destroyed', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const d = fakeDomain();
        const coupon = await d.createCoupon('p', s.total, s.shardCount, s.perUserLimit);
        for (const b of s.batches) {
          if (b.lose !== undefined) {
            d.store.lose(shardRef(coupon, b.lose % s.shardCount));
            if (b.recoverNow) await d.recovery.recover('p', 'lost');
          }
          const results = await Promise.allSettled(
            b.ops.map((o) => {
              switch (o.kind) {
                case 'deduct':
                  return d.deduct.deduct({ couponId: 'p', requestId: `r${o.request}`, userId: `u${o.user}`, quantity: BigInt(o.quantity) });
                case 'compensate':
                  return d.compensate.compensate({ couponId: 'p', requestId: `r${o.request}`, reason: 'property' });
                case 'restock':
                  return d.admin.restock({ couponId: 'p', requestId: `s${o.request}`, quantity: BigInt(o.quantity) });
                default: // sweep
                  return d.sweeper.sweep(coupon);
              }
            }),
          );
          for (const r of results) {
            if (r.status === 'fulfilled') continue;
            if (!(r.reason instanceof DomainError && EXPECTED.has(r.reason.kind))) throw r.reason;
          }
        }

        // Quiescence: unacknowledged moves finished, lost shards rebuilt, every move landed.
        await settle();
        if (allShards(coupon).some((ref) => !d.store.shard(ref))) await d.recovery.recover('p', 'quiescence');
        for (let i = 0; i < 5; i++) await d.sweeper.sweep(coupon);

        const total = d.repo.coupons.get('p')!.totalStock;
        const u = d.units(coupon);
        expect(u.transit).toBe(0);
        expect(u.sum).toBe(total);
        for (const ref of allShards(coupon)) expect(d.store.shard(ref)!.avail).toBeGreaterThanOrEqual(0);
        // Redis's net is what the event log (the ledger to be) says, and no request deducted twice. On limited
        // coupons, per user: a request id reused by another user after its claim's shard was lost, before any
        // recovery put the claim back, deducts again (see "known gaps" in recovery.test.ts).
        let net = 0;
        const deducted = new Map<string, number>();
        for (const e of d.store.events) {
          net += e.kind === 'D' ? e.quantity : -e.quantity;
          const key = s.perUserLimit > 0 ? `${e.requestId}|${e.userId}` : e.requestId;
          if (e.kind === 'D') deducted.set(key, (deducted.get(key) ?? 0) + 1);
        }
        expect(u.net).toBe(net);
        for (const [, n] of deducted) expect(n).toBe(1);
        expect(d.errors).toEqual([]);
      }),
      {
        numRuns: 150,
        examples: [
          // Found by the property: r5 deducted on shard 1, both shards lost and rebuilt (the net no live shard
          // counted put on shard 0), r5 compensated on shard 1 (net -1 there), shard 1 lost again: shard 0's
          // net of 1 alone was taken for a sale MySQL never received, and the rebuild destroyed the unit.
          [
            {
              total: 1,
              shardCount: 2,
              perUserLimit: 3,
              batches: [
                { lose: undefined, recoverNow: false, ops: [{ kind: 'deduct', request: 5, quantity: 1, user: 0 }] },
                { lose: 3, recoverNow: false, ops: [{ kind: 'sweep' }] },
                { lose: 0, recoverNow: false, ops: [{ kind: 'compensate', request: 5 }, { kind: 'sweep' }] },
                { lose: 3, recoverNow: false, ops: [{ kind: 'deduct', request: 0, quantity: 1, user: 0 }] },
              ],
            },
          ],
        ],
      },
    );
  }, 120_000);
});
