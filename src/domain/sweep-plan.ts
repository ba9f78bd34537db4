// Which shards the move sweep reads. A started move lives in its source shard's `moves` hash until the mover
// (or a sweeper) lands and acknowledges it. Reading every shard of every coupon this instance ever served,
// one after another, costs one round trip per shard per sweep (40,000 with 10,000 coupons of 4 shards)
// however few moves are pending. So a sweep reads:
// - suspects: shards where this instance took units out (moveOut answered), or saw units in transit in a
//   probe (a move by any instance: a live one's, or a dead one's that only a sweeper will finish). A suspect
//   stays one until a sweep finds nothing pending there, so a move too young to sweep is looked at again;
// - a slice of a cycle over every shard of every served coupon: the net for moves nobody here saw start (a
//   mover killed before its answer, a coupon this instance never probes). A slice is MIN_SLICE shards, or
//   more when that is needed to finish a cycle within CYCLE_MS. With a few hundred shards the slice is the
//   whole cycle, as every sweep was before; with 40,000 and the 2 s default interval a cycle takes 30 sweeps
//   of 1,334 shards (~100 ms each on the local stack, where the old loop took 25-30 s per sweep). Every
//   started move is still landed or returned: within one cycle, by whichever instance sweeps.
// Reads run PARALLEL at a time (ioredis pipelines them per master) instead of one after another.
import type { Coupon, ShardLevel, StockStore } from './ports.js';

/** Shards of the cycle read per sweep at least. */
export const MIN_SLICE = 1024;
/** A cycle over every served shard should take about this long at most. */
export const CYCLE_MS = 60_000;
/** Shards swept at once. */
export const PARALLEL = 64;

export interface ShardSweeper {
  /** Lands what is pending at one source shard; `left` counts the moves still pending there. */
  sweepShard(coupon: Coupon, index: number): Promise<{ done: number; left: number }>;
}

/** Shards that may hold pending moves, as this instance's store answers show. */
export class MoveSuspects {
  private readonly shards = new Map<string, { couponId: string; index: number }>();

  mark(couponId: string, index: number): void {
    const key = `${couponId}\u0000${index}`;
    if (!this.shards.has(key)) this.shards.set(key, { couponId, index });
  }

  /** Hands over every suspect; the sweep marks again the ones it could not clear. */
  take(): { couponId: string; index: number }[] {
    const all = [...this.shards.values()];
    this.shards.clear();
    return all;
  }

  get size(): number {
    return this.shards.size;
  }
}

type Seen = (args: unknown[], result: unknown) => void;

/** StockStore answers that say a shard may hold a pending move: hooks for `timed` (called after success). */
export function moveObservers(suspects: MoveSuspects): Partial<Record<keyof StockStore, Seen>> {
  type Ref = { couponId: string; index: number };
  return {
    moveOut: (args, r) => {
      if (typeof r === 'number' && r > 0) suspects.mark((args[0] as Ref).couponId, (args[0] as Ref).index);
    },
    probe: (args, r) => {
      const shards = args[0] as Ref[];
      if (shards.length === 0) return;
      for (const l of r as ShardLevel[]) if (l.inTransit > 0) suspects.mark(shards[0]!.couponId, l.index);
    },
  };
}

export interface SweepReport {
  /** Shards read this sweep (suspects and the cycle's slice). */
  read: number;
  /** Moves landed. */
  done: number;
  /** Whether this sweep finished a cycle over every served shard. */
  cycleEnded: boolean;
}

export class SweepPlan {
  private cycle: Coupon[] = [];
  private couponAt = 0;
  private shardAt = 0;
  private sliceShards = MIN_SLICE;
  /** Cycles over every served shard completed, and moves landed, since start. */
  cycles = 0;
  landed = 0;

  constructor(
    private readonly d: {
      suspects: MoveSuspects;
      sweeper: ShardSweeper;
      /** Coupons this instance serves: each cycle covers those known when it starts. */
      coupons: { active(): Coupon[]; peek(id: string): Coupon | undefined };
      /** The sweep's interval: how many sweeps a cycle may take (CYCLE_MS / intervalMs). */
      intervalMs: number;
      minSlice?: number;
      parallel?: number;
    },
  ) {}

  async run(): Promise<SweepReport> {
    const work = new Map<string, { coupon: Coupon; index: number }>();
    for (const s of this.d.suspects.take()) {
      const coupon = this.d.coupons.peek(s.couponId);
      // Forgotten by the catalog: the cycle does not cover it either, as the sweep never did.
      if (coupon && s.index < coupon.shardTags.length) work.set(`${s.couponId}\u0000${s.index}`, { coupon, index: s.index });
    }
    const cycleEnded = this.slice(work);
    let done = 0;
    let firstError: unknown;
    const items = [...work.values()];
    let next = 0;
    const lane = async () => {
      while (next < items.length) {
        const { coupon, index } = items[next++]!;
        try {
          const r = await this.d.sweeper.sweepShard(coupon, index);
          done += r.done;
          if (r.left > 0) this.d.suspects.mark(coupon.id, index);
        } catch (err) {
          this.d.suspects.mark(coupon.id, index);
          firstError ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.d.parallel ?? PARALLEL, items.length) }, lane));
    // Every shard was tried; the failed ones are suspects for the next sweep.
    this.landed += done;
    if (firstError !== undefined) throw firstError;
    return { read: items.length, done, cycleEnded };
  }

  /** Adds the cycle's next shards to `work`; true when the cycle ended with them. */
  private slice(work: Map<string, { coupon: Coupon; index: number }>): boolean {
    if (this.couponAt >= this.cycle.length) {
      this.cycle = this.d.coupons.active();
      this.couponAt = 0;
      this.shardAt = 0;
      let shards = 0;
      for (const c of this.cycle) shards += c.shardTags.length;
      const sweeps = Math.max(1, Math.floor(CYCLE_MS / this.d.intervalMs));
      this.sliceShards = Math.max(this.d.minSlice ?? MIN_SLICE, Math.ceil(shards / sweeps));
    }
    let budget = this.sliceShards;
    while (budget > 0 && this.couponAt < this.cycle.length) {
      const coupon = this.cycle[this.couponAt]!;
      if (this.shardAt < coupon.shardTags.length) {
        work.set(`${coupon.id}\u0000${this.shardAt}`, { coupon, index: this.shardAt });
        this.shardAt++;
        budget--;
      } else {
        this.couponAt++;
        this.shardAt = 0;
      }
    }
    // Skip past a finished last coupon, so the cycle ends in this sweep rather than an empty next one.
    while (this.couponAt < this.cycle.length && this.shardAt >= this.cycle[this.couponAt]!.shardTags.length) {
      this.couponAt++;
      this.shardAt = 0;
    }
    if (this.couponAt < this.cycle.length) return false;
    this.cycles++;
    return true;
  }
}
