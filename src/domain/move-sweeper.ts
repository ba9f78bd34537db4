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

  async sweepShard(coupon: Coupon, index: number): Promise<{ done: number; left: number }> {
    const source = shardRef(coupon, index);
    let done = 0;
    let left = 0;
    for (const m of await this.store.pendingMoves(source)) {
      if (Date.now() - m.startedMs < this.graceMs) {
        left++;
        continue;
      }
      const target = shardRef(coupon, m.target);
      let r = await this.store.credit(target, moveCreditId(m.moveId), m.quantity);
      if (r === 'missing') {
        // The reload counts this move's units as transit of the source, so crediting afterwards is exact.
        await this.reloader.reload(coupon, m.target);
        r = await this.store.credit(target, moveCreditId(m.moveId), m.quantity);
      }
      // Missing still, or paused by a recovery: the next sweep finishes it.
      if (r === 'missing' || r === 'paused') {
        left++;
        continue;
      }
      await this.store.ackMove(source, m.moveId);
      done++;
    }
    this.finished += done;
    return { done, left };
  }
}
