// Once a coupon is exhausted, Deduct answers SOLD_OUT from memory. The flag can only make this instance
// refuse, never deduct; it is dropped when any instance signals returned stock (Restock, Compensate, a
// recovery that put units back) and expires after a short TTL in case such a signal was missed. When it expires, ONE caller goes
// to Redis to look again while the others keep refusing for a short grace: without that, every call in
// flight probed all shards at once each time the flag lapsed.
import type { StockSignals } from './ports.js';

/** How long the other callers keep refusing while one re-checks an expired flag. */
const RECHECK_GRACE_MS = 250;

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
    const now = Date.now();
    if (t <= now) {
      // This caller re-checks; its outcome either marks the flag again (still sold out) or clears it.
      this.until.set(couponId, now + RECHECK_GRACE_MS);
      return false;
    }
    this.hits++;
    return true;
  }

  mark(couponId: string): void {
    if (this.ttlMs > 0) this.until.set(couponId, Date.now() + this.ttlMs);
  }

  clear(couponId: string): void {
    if (this.until.size > 0) this.until.delete(couponId);
  }
}
