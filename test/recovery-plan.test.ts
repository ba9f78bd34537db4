// The recovery decision without a cluster: whatever the live shards hold and whichever shards are missing,
// the plan never leaves the shards above the bound (except units in transit it cannot take), never below what
// it may keep, never takes a shard below zero, and only a repair (restore) adds to live shards.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planRecovery, type LiveShard } from '../src/recovery/recovery-plan.js';

const shards = fc.integer({ min: 1, max: 16 }).chain((n) =>
  fc.tuple(
    fc.constant(n),
    fc.array(
      fc.record({
        available: fc.integer({ min: 0, max: 500 }),
        inTransit: fc.integer({ min: 0, max: 50 }),
        held: fc.integer({ min: 0, max: 50 }),
        net: fc.integer({ min: -20, max: 500 }),
        missing: fc.boolean(),
      }),
      { minLength: n, maxLength: n },
    ),
  ),
);

function after(live: LiveShard[], plan: ReturnType<typeof planRecovery>) {
  const avail = new Map(live.map((s) => [s.index, s.available]));
  for (const a of plan.adjust) avail.set(a.index, avail.get(a.index)! + a.delta);
  // Units in open holds are kept by the shard like available ones (they are still MySQL's remaining).
  const liveHeld = live.reduce((sum, s) => sum + avail.get(s.index)! + s.inTransit + (s.held ?? 0), 0);
  return { avail, held: liveHeld + plan.rebuild.reduce((sum, r) => sum + r.available, 0) };
}

describe('recovery plan', () => {
  it('when shards are missing, over or under the bound, then the plan meets the bound without creating units', () => {
    fc.assert(
      fc.property(
        shards,
        fc.integer({ min: -100, max: 5000 }),
        fc.integer({ min: 0, max: 5000 }),
        fc.boolean(),
        ([, raw], bound, netDeducted, restore) => {
          const live: LiveShard[] = [];
          const missing: number[] = [];
          for (const [index, s] of raw.entries()) {
            if (s.missing) missing.push(index);
            else live.push({ index, available: s.available, inTransit: s.inTransit, held: s.held, net: s.net });
          }
          const plan = planRecovery({ live, missing, bound, netDeducted, restore });
          const r = after(live, plan);
          // Units every shard together counts as sold beyond what MySQL and the pipeline know never go back on
          // sale. With shards missing, the live ones' net says nothing of the sort (one shard's net may be
          // negative), so nothing is kept off.
          const liveNet = live.reduce((sum, s) => sum + s.net, 0);
          expect(plan.unrecorded).toBe(missing.length === 0 ? Math.max(0, liveNet - netDeducted) : 0);
          const cap = Math.max(0, bound - plan.unrecorded);
          for (const v of r.avail.values()) expect(v).toBeGreaterThanOrEqual(0);
          for (const b of plan.rebuild) expect(b.available).toBeGreaterThanOrEqual(0);
          // Never above the bound, but for transit units it may not take.
          expect(r.held).toBeLessThanOrEqual(cap + plan.unreachableSurplus);
          // Only units in transit or in open holds cannot be taken.
          const liveTransit = live.reduce((sum, s) => sum + s.inTransit + (s.held ?? 0), 0);
          expect(plan.unreachableSurplus).toBeLessThanOrEqual(liveTransit);
          // Exactly at the bound whenever it may add units (a rebuild, or a repair with restore) and nothing is stuck
          // in transit; a surplus alone is always taken down to the bound when it can be.
          const mayAdd = missing.length > 0 || (restore && live.length > 0);
          if (plan.unreachableSurplus === 0 && (mayAdd || plan.heldBefore > cap)) expect(r.held).toBe(cap);
          if (!mayAdd && plan.heldBefore <= cap) expect(r.held).toBe(plan.heldBefore);
          // A rebuild alone never adds to a live shard.
          if (!restore || missing.length > 0) for (const a of plan.adjust) expect(a.delta).toBeLessThan(0);
          // Missing shards take the net deductions live ones do not count.
          if (missing.length > 0) {
            expect(plan.rebuild.reduce((sum, b) => sum + b.net, 0) + liveNet).toBe(netDeducted);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('when live shards hold a surplus, then it is taken from the fullest shards first', () => {
    const plan = planRecovery({
      live: [
        { index: 0, available: 5, inTransit: 0, net: 0 },
        { index: 1, available: 30, inTransit: 0, net: 0 },
        { index: 2, available: 10, inTransit: 0, net: 0 },
      ],
      missing: [],
      bound: 20,
      netDeducted: 0,
      restore: false,
    });
    expect(plan.adjust).toEqual([{ index: 1, delta: -25 }]);
  });

  it('when live shards count 8 units sold that MySQL never received, then a repair gives none of them back', () => {
    // 20 units, 8 sold on shard 0 whose events JetStream lost: MySQL still says 20 remain, nothing in flight.
    const plan = planRecovery({
      live: [
        { index: 0, available: 2, inTransit: 0, net: 8 },
        { index: 1, available: 10, inTransit: 0, net: 0 },
      ],
      missing: [],
      bound: 20,
      netDeducted: 0,
      restore: true,
    });
    expect(plan.unrecorded).toBe(8);
    expect(plan.adjust).toEqual([]);
  });

  it('when every shard is lost, then the whole bound is split over them and the net goes to the first', () => {
    const plan = planRecovery({ live: [], missing: [0, 1, 2], bound: 910, netDeducted: 90, restore: false });
    expect(plan.rebuild).toEqual([
      { index: 0, available: 304, net: 90 },
      { index: 1, available: 303, net: 0 },
      { index: 2, available: 303, net: 0 },
    ]);
  });
});
