// Tells this instance's relay which shards' outboxes a call served here has just written, so that it reads
// them within a few milliseconds instead of at its next poll (up to its poll interval later): during a sale,
// that poll was a fixed wait added to every event's settlement lag. Writes made by other instances are still
// found by polling. Fed by the store's answers (the `timed` observers, as the level checks are).
import type { ShardRef, StockStore } from '../../domain/ports.js';
import type { StoreObservers } from '../../observability/timed-store.js';

export class OutboxWrites {
  private listener: ((shard: ShardRef) => void) | undefined;

  /** A Deduct or Compensate on `shard` wrote an outbox entry. */
  wrote(shard: ShardRef): void {
    this.listener?.(shard);
  }

  /** One listener (the relay); returns the function that removes it. */
  listen(fn: (shard: ShardRef) => void): () => void {
    this.listener = fn;
    return () => {
      if (this.listener === fn) this.listener = undefined;
    };
  }
}

/** The store answers that wrote an outbox entry (deduct-7.lua, compensate-6.lua, their batches). */
export function outboxObservers(writes: OutboxWrites): StoreObservers {
  return {
    deduct: (args, r) => {
      if ((r as Awaited<ReturnType<StockStore['deduct']>>).kind === 'deducted') writes.wrote(args[0] as ShardRef);
    },
    compensate: (args, r) => {
      if ((r as Awaited<ReturnType<StockStore['compensate']>>).kind === 'compensated') writes.wrote(args[0] as ShardRef);
    },
  };
}
