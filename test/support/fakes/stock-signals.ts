// StockSignals in memory: one bus every "instance" of a test shares. Delivery is asynchronous (a microtask),
// as a NATS message arrives after the publish returns.
import type { ClusterTopology, StockSignals } from '../../../src/domain/ports.js';

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

/** Every slot owned by one master: shard tags are then chosen only to be distinct. */
export class FakeTopology implements ClusterTopology {
  slotOwners(): ReadonlyArray<ReadonlyArray<string> | undefined> {
    return Array.from({ length: 16384 }, () => ['127.0.0.1:7001']);
  }
}
