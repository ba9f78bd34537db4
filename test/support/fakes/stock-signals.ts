// StockSignals in memory: one bus every "instance" of a test shares. Delivery is asynchronous (a microtask),
// as a NATS message arrives after the publish returns.
import type { ShardPlacement, StockSignals } from '../../../src/domain/ports.js';

export class FakeStockSignals implements StockSignals {
  private readonly listeners = new Set<(couponId: string) => void>();
  readonly returned: string[] = [];

  stockReturned(couponId: string): void {
    this.returned.push(couponId);
    queueMicrotask(() => {
      for (const l of this.listeners) l(couponId);
    });
  }

  onStockReturned(listener: (couponId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** Tags that only need to be distinct: there is no cluster to spread over. */
export class FakePlacement implements ShardPlacement {
  shardTags(couponId: string, shardCount: number): string[] {
    return Array.from({ length: shardCount }, (_, i) => `${couponId}:s${i}`);
  }
}
