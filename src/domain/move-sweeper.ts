// Finishes fallback moves whose mover died between taking units out of a source shard and acknowledging
// them: credits the target (idempotent by move id, so a live mover racing the sweeper cannot double it) and
// acknowledges at the source. Nothing is created: the units were counted as transit at the source until now.
// Which shards to look at is sweep-plan.ts's job; this lands what one shard has pending.
import type { Coupon, StockStore } from './ports.js';
import type { ShardReloader } from './shard-reloader.js';
import type { ShardSweeper } from './sweep-plan.js';
import { moveCreditId } from './ids.js';
import { shardRef } from './routing.js';

export class MoveSweeper implements ShardSweeper {
  finished = 0;

  constructor(
    private readonly store: StockStore,
    private readonly reloader: ShardReloader,
    /** A move younger than this is left to its mover. */
    private readonly graceMs = 3000,
  ) {}

  /** Every shard of the coupon, one after another. */
  async sweep(coupon: Coupon): Promise<number> {
    let done = 0;
    for (let index = 0; index < coupon.shardTags.length; index++) done += (await this.sweepShard(coupon, index)).done;
    return done;
  }

  /** graceMs: a waiting Deduct (deduct.ts) lands moves younger than the sweeper's own grace. */
  async sweepShard(coupon: Coupon, index: number, graceMs = this.graceMs): Promise<{ done: number; left: number }> {
    const source = shardRef(coupon, index);
    let done = 0;
    let left = 0;
    if ((await this.store.pendingMoves(source)).length === 0) return { done, left };
    // The targets' recovery epochs are read before the moves are (again), and each credit lands only under its
    // target's epoch. A recovery that runs after the moves are read may have lost the source's slot whole, moves
    // and all, and counted their units into the rebuilt source; it moves every shard's epoch, so the credit is
    // refused rather than landing those units a second time. A recovery before the read leaves no such move.
    const epochs = await this.store.epochs(coupon.shardTags.map((_, i) => shardRef(coupon, i)));
    for (const m of await this.store.pendingMoves(source)) {
      if (Date.now() - m.startedMs < graceMs) {
        left++;
        continue;
      }
      const target = shardRef(coupon, m.target);
      const epoch = epochs[m.target];
      const r = epoch == null ? 'missing' : await this.store.credit(target, moveCreditId(m.moveId), m.quantity, epoch);
      if (r === 'missing') {
        // The reload counts this move's units as transit of the source, so crediting afterwards is exact. It
        // also moves the target's epoch: the next sweep reads it afresh and lands the move.
        await this.reloader.reload(coupon, m.target);
        left++;
        continue;
      }
      // Paused by a recovery, or one ran since the epochs were read: the next sweep finishes it.
      if (r === 'paused' || r === 'stale') {
        left++;
        continue;
      }
      // Counted by whoever removed it: another instance's sweeper, or a waiting Deduct, may land it at once.
      if (await this.store.ackMove(source, m.moveId)) done++;
    }
    this.finished += done;
    return { done, left };
  }
}
