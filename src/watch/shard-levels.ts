// The units each shard was last seen holding, as a by-product of calls this instance makes anyway: every
// Deduct script answers its shard's remaining units, a 'short' answer its available units, a probe every
// shard's. Level checks (low-stock, sold-out) read the sum to decide whether a coupon may have crossed a
// threshold before they spend a probe on it. Other instances deduct too, so a shard's figure can only be
// too high by what they took since; level-checks.ts bounds how long a check may trust it.
import type { ShardLevel, StockStore } from '../domain/ports.js';

/** Coupons remembered at most; beyond it the oldest-inserted is dropped (its next check probes). */
const MAX_COUPONS = 100_000;

export class ShardLevels {
  /** couponId -> units per shard index (undefined: not seen since the shard was last rebuilt) */
  private readonly seen = new Map<string, (number | undefined)[]>();

  constructor(private readonly maxCoupons = MAX_COUPONS) {}

  /** One shard's units after a call on it. */
  set(couponId: string, index: number, units: number): void {
    let shards = this.seen.get(couponId);
    if (!shards) {
      if (this.seen.size >= this.maxCoupons) this.seen.delete(this.seen.keys().next().value!);
      shards = [];
      this.seen.set(couponId, shards);
    }
    shards[index] = units;
  }

  /** A shard's units changed by `delta` (a move out or a credit in); unknown stays unknown. */
  add(couponId: string, index: number, delta: number): void {
    const shards = this.seen.get(couponId);
    const v = shards?.[index];
    if (shards && v !== undefined) shards[index] = Math.max(0, v + delta);
  }

  /** Every shard of a probe; a missing shard (available null) is unknown until rebuilt and seen again.
   * Units in transit between shards are left out, as a Deduct answer leaves them out: an estimate can only
   * be low by them, which costs an early probe, never a missed crossing. */
  setAll(couponId: string, levels: readonly ShardLevel[]): void {
    for (const l of levels) {
      if (l.available === null) this.forget(couponId, l.index);
      else this.set(couponId, l.index, l.available);
    }
  }

  forget(couponId: string, index?: number): void {
    if (index === undefined) this.seen.delete(couponId);
    else {
      const shards = this.seen.get(couponId);
      if (shards) shards[index] = undefined;
    }
  }

  /** Σ units over the coupon's shards as last seen, or undefined when some shard was never seen. */
  estimate(couponId: string, shardCount: number): number | undefined {
    const shards = this.seen.get(couponId);
    if (!shards || shards.length < shardCount) return undefined;
    let sum = 0;
    for (let i = 0; i < shardCount; i++) {
      const v = shards[i];
      if (v === undefined) return undefined;
      sum += v;
    }
    return sum;
  }

  get size(): number {
    return this.seen.size;
  }
}

type Seen = (args: unknown[], result: unknown) => void;

/** What each StockStore answer tells about its shard's units: hooks for `timed` (called after success). */
export function levelObservers(levels: ShardLevels): Partial<Record<keyof StockStore, Seen>> {
  type Ref = { couponId: string; index: number };
  return {
    deduct: (args, r) => {
      const shard = args[0] as Ref;
      const res = r as Awaited<ReturnType<StockStore['deduct']>>;
      if (res.kind === 'deducted') levels.set(shard.couponId, shard.index, res.remaining);
      else if (res.kind === 'short') levels.set(shard.couponId, shard.index, res.available);
      else if (res.kind === 'missing') levels.forget(shard.couponId, shard.index);
    },
    compensate: (args, r) => {
      const shard = args[0] as Ref;
      const res = r as Awaited<ReturnType<StockStore['compensate']>>;
      if (res.kind === 'compensated' || res.kind === 'already') levels.set(shard.couponId, shard.index, res.remaining);
    },
    probe: (args, r) => {
      const shards = args[0] as Ref[];
      if (shards.length > 0) levels.setAll(shards[0]!.couponId, r as ShardLevel[]);
    },
    // Units a move takes out are in transit: they count again once credited where they land.
    moveOut: (args, r) => {
      const shard = args[0] as Ref;
      if (typeof r === 'number') levels.add(shard.couponId, shard.index, -r);
    },
    credit: (args, r) => {
      const shard = args[0] as Ref;
      if (r === 'applied') levels.add(shard.couponId, shard.index, args[2] as number);
    },
    // A shard this instance created (CreateCoupon, a rebuild) holds what it was given; one that existed already
    // holds what nobody here has seen.
    initShard: (args, r) => {
      const shard = args[0] as Ref;
      if (r === true) levels.set(shard.couponId, shard.index, args[1] as number);
      else levels.forget(shard.couponId, shard.index);
    },
  };
}
