// Finishes fallback moves whose mover died between taking units out of a source shard and acknowledging
// them: credits the target (idempotent by move id, so a live mover racing the sweeper cannot double it) and
// acknowledges at the source. Nothing is created: the units were counted as transit at the source until now.
import type { Coupon, StockStore } from './ports.js';
import type { ShardReloader } from './shard-reloader.js';
import { moveCreditId } from './ids.js';
import { allShards, shardRef } from './routing.js';

export class MoveSweeper {
  finished = 0;

  constructor(
    private readonly store: StockStore,
    private readonly reloader: ShardReloader,
    /** A move younger than this is left to its mover. */
    private readonly graceMs = 3000,
  ) {}

  async sweep(coupon: Coupon): Promise<number> {
    let done = 0;
    for (const source of allShards(coupon)) {
      for (const m of await this.store.pendingMoves(source)) {
        if (Date.now() - m.startedMs < this.graceMs) continue;
        const target = shardRef(coupon, m.target);
        let r = await this.store.credit(target, moveCreditId(m.moveId), m.quantity);
        if (r === 'missing') {
          // The reload counts this move's units as transit of the source, so crediting afterwards is exact.
          await this.reloader.reload(coupon, m.target);
          r = await this.store.credit(target, moveCreditId(m.moveId), m.quantity);
        }
        // Missing still, or paused by a recovery: the next sweep finishes it.
        if (r === 'missing' || r === 'paused') continue;
        await this.store.ackMove(source, m.moveId);
        done++;
      }
    }
    this.finished += done;
    return done;
  }
}
