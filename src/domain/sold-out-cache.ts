// Once a coupon is exhausted, Deduct answers SOLD_OUT from memory. The flag can only make this instance
// refuse, never deduct; it is dropped when any instance signals returned stock (Restock, Compensate, a
// refund) and expires after a short TTL in case such a signal was missed.
import type { StockSignals } from './ports.js';

export class SoldOutCache {
  private readonly until = new Map<string, number>();
  hits = 0;

  constructor(
    private readonly ttlMs: number,
    signals?: StockSignals,
  ) {
    signals?.onStockReturned((couponId) => this.clear(couponId));
  }

  isSoldOut(couponId: string): boolean {
    const t = this.until.get(couponId);
    if (t === undefined) return false;
    if (t <= Date.now()) {
      this.until.delete(couponId);
      return false;
    }
    this.hits++;
    return true;
  }

  mark(couponId: string): void {
    if (this.ttlMs > 0) this.until.set(couponId, Date.now() + this.ttlMs);
  }

  clear(couponId: string): void {
    this.until.delete(couponId);
  }
}
