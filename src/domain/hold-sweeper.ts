// Expires holds on every instance, so that a hold is given back within about one sweep interval of its expiry
// even when the instance that made it is gone. Each expiry is one atomic script (hold-expire-6.lua) that
// only the first caller finds open and due: any number of sweepers on any number of instances expire each
// hold exactly once. Sweepers visit only the shards in the index of shards with open holds; a slower full
// pass over the active coupons puts back any shard the index lost (a crash between a Reserve and its add).
import type { Coupon, HoldExpiry, ShardRef, StockChanges, StockSignals } from './ports.js';
import { allShards } from './routing.js';
import type { SoldOutCache } from './sold-out-cache.js';

/** Holds expired per shard per script round trip batch. */
const DUE_BATCH = 500;
/** Shards the full pass reads at once. With 10,000 coupons it has 40,000 shards to look at: all at once was
 * one burst of 40,000 commands that stalled every call in flight for seconds (the many-coupons bench's p99). */
const FULL_PASS_SLICE = 256;

export interface HoldSweepStats {
  sweeps: number;
  expiredHolds: number;
  expiredUnits: number;
  reindexed: number;
}

export class HoldSweeper {
  readonly stats: HoldSweepStats = { sweeps: 0, expiredHolds: 0, expiredUnits: 0, reindexed: 0 };

  constructor(
    private readonly store: HoldExpiry,
    private readonly soldOut: SoldOutCache,
    private readonly signals: StockSignals,
    private readonly changes?: StockChanges,
    private readonly onError: (what: string, err: unknown) => void = () => {},
  ) {}

  /** One pass over the index. */
  async sweep(): Promise<void> {
    this.stats.sweeps++;
    const shards = await this.store.indexed();
    await Promise.all(shards.map((s) => this.sweepShard(s).catch((err) => this.onError('hold sweep', err))));
  }

  /** The backstop: every shard of these coupons with open holds goes back into the index. */
  async fullPass(coupons: Iterable<Coupon>): Promise<void> {
    let slice: ShardRef[] = [];
    for (const c of coupons) {
      for (const s of allShards(c)) slice.push(s);
      if (slice.length >= FULL_PASS_SLICE) {
        const added = await this.store.reindex(slice);
        this.stats.reindexed += added;
        slice = [];
      }
    }
    if (slice.length > 0) {
      const added = await this.store.reindex(slice);
      this.stats.reindexed += added;
    }
  }

  private async sweepShard(shard: ShardRef): Promise<void> {
    let given = 0;
    for (;;) {
      const { open, due } = await this.store.due(shard, DUE_BATCH);
      if (open === 0) {
        await this.store.unindexIfEmpty(shard);
        break;
      }
      if (due.length === 0) break;
      const results = await Promise.all(due.map((m) => this.store.expire(shard, m)));
      let progressed = false;
      for (const r of results) {
        if (typeof r !== 'number') continue;
        progressed = true;
        if (r > 0) {
          this.stats.expiredHolds++;
          this.stats.expiredUnits += r;
          given += r;
        }
      }
      // Paused or lost shard: a later sweep (after the recovery) finishes it.
      if (!progressed || due.length < DUE_BATCH) break;
    }
    if (given > 0) {
      this.soldOut.clear(shard.couponId);
      this.signals.stockReturned(shard.couponId);
      this.changes?.changed(shard.couponId, true);
    }
  }
}
