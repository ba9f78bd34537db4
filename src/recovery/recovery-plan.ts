// What a recovery does to a paused coupon, decided without I/O from one consistent reading of it.
//
// The bound: the units the shards may hand out (available + in transit) are never more than MySQL's settled
// remaining minus the net units still on their way to MySQL (outbox + JetStream, not yet settled). With the
// coupon paused nothing sells or gives back while it is read, so the reading is one moment in time.
//
// - Missing shards are rebuilt with whatever the bound leaves after the live shards, split evenly.
// - Live shards holding more than the bound give the surplus up (from available: units in transit are on
//   their way to another shard), largest first.
// - With `restore` (a repair), live shards holding less than the bound get the difference back: units a bug
//   or a lost credit destroyed. A rebuild alone never adds to live shards.
// - Units the live shards count as sold (their net) beyond what MySQL and the pipeline know of were sold by
//   deductions whose events were lost on the way (JetStream lost messages the relay had already removed from
//   the outbox): MySQL's remaining still has them, so the bound is lowered by them. Without that a repair gave
//   them back as "destroyed" units and they were sold twice (test/jetstream-loss.test.ts: 28 sold of 20).

import { splitEvenly } from '../domain/routing.js';

export interface LiveShard {
  index: number;
  available: number;
  inTransit: number;
  net: number;
  /** Units in open holds: kept out of available but still MySQL's remaining, so they count against the bound. */
  held?: number;
}

export interface RecoveryInput {
  live: LiveShard[];
  missing: number[];
  /** MySQL settled remaining minus net units in flight. */
  bound: number;
  /** Units the coupon has handed out net of give-backs, as Redis should count them: total − remaining + in flight. */
  netDeducted: number;
  restore: boolean;
}

export interface RecoveryPlan {
  rebuild: { index: number; available: number; net: number }[];
  /** Changes to live shards' available units (negative: taken away). */
  adjust: { index: number; delta: number }[];
  heldBefore: number;
  /** Units the live shards count as sold that MySQL neither settled nor has on the way: kept off sale. */
  unrecorded: number;
  /** Units the live shards hold above the bound that could not be taken (in transit, or in open holds): the
   * bound is met again once those moves land and sell, or those holds are confirmed. 0 almost always. */
  unreachableSurplus: number;
}

export function planRecovery(input: RecoveryInput): RecoveryPlan {
  const liveNet = input.live.reduce((sum, s) => sum + s.net, 0);
  // Only over every shard: one shard's net is bookkeeping (a rebuild puts the net no live shard counted on the
  // first rebuilt shard, and a later compensation lowers its request's own shard), so live shards alone can
  // count more than was sold while a missing one held the matching negative. Taken with shards missing, that
  // excess lowered the bound and destroyed units (test/domain/conservation.test.ts).
  const unrecorded = input.missing.length === 0 ? Math.max(0, liveNet - input.netDeducted) : 0;
  const bound = Math.max(0, input.bound - unrecorded);
  const held = input.live.reduce((sum, s) => sum + s.available + s.inTransit + (s.held ?? 0), 0);
  const plan: RecoveryPlan = { rebuild: [], adjust: [], heldBefore: held, unrecorded, unreachableSurplus: 0 };

  if (held > bound) {
    let surplus = held - bound;
    const byAvailable = [...input.live].sort((a, b) => b.available - a.available || a.index - b.index);
    for (const s of byAvailable) {
      if (surplus === 0) break;
      const take = Math.min(s.available, surplus);
      if (take > 0) plan.adjust.push({ index: s.index, delta: -take });
      surplus -= take;
    }
    plan.unreachableSurplus = surplus;
  }

  const room = Math.max(0, bound - held);
  if (input.missing.length > 0) {
    const split = splitEvenly(room, input.missing.length);
    input.missing.forEach((index, i) => {
      // The coupon's net deductions not counted by a live shard go to the first rebuilt one, so that
      // total − Σnet stays the coupon's true remainder.
      plan.rebuild.push({ index, available: split[i]!, net: i === 0 ? input.netDeducted - liveNet : 0 });
    });
  } else if (input.restore && room > 0 && input.live.length > 0) {
    const split = splitEvenly(room, input.live.length);
    input.live.forEach((s, i) => {
      if (split[i]! > 0) plan.adjust.push({ index: s.index, delta: split[i]! });
    });
  }
  return plan;
}
