// Once a coupon is exhausted, Deduct answers SOLD_OUT from memory. The flag can only make this instance
// refuse, never deduct; it is dropped when any instance signals returned stock (Restock, Compensate, a
// recovery that put units back) and expires after a short TTL in case such a signal was missed. When it expires, ONE caller goes
// to Redis to look again while the others keep refusing for a short grace: without that, every call in
// flight probed all shards at once each time the flag lapsed.
// A mark rests on reads made a moment earlier. Units returned in between (here, or on another instance whose
// signal arrived before the mark) found no flag to drop, so a mark made after them would refuse the returned
// units for the whole TTL: mark() takes the time its reads began and is ignored when stock came back since.
import type { StockSignals } from './ports.js';

/** How long the other callers keep refusing while one re-checks an expired flag. */
const RECHECK_GRACE_MS = 250;
/** How long a return is remembered against marks from reads begun before it; older reads never mark. */
const RETURN_MEMORY_MS = 60_000;

export class SoldOutCache {
  private readonly until = new Map<string, number>();
  /** When units last came back per coupon (performance.now()), for RETURN_MEMORY_MS. */
  private readonly returnedAt = new Map<string, number>();
  private pruneAt = 1024;
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

  /** Taken before the reads a sold-out decision rests on, and passed to mark(). */
  stamp(): number {
    return performance.now();
  }

  /** `readsBegan`: stamp() from before the reads that found the coupon empty. */
  mark(couponId: string, readsBegan: number): void {
    if (this.ttlMs <= 0) return;
    if (performance.now() - readsBegan > RETURN_MEMORY_MS) return;
    if ((this.returnedAt.get(couponId) ?? Number.NEGATIVE_INFINITY) >= readsBegan) return;
    this.until.set(couponId, Date.now() + this.ttlMs);
  }

  /** Units came back (Restock, Compensate, a hold ended, a recovery): stop refusing, and refuse marks from
   * reads made before now. */
  clear(couponId: string): void {
    const now = performance.now();
    this.returnedAt.set(couponId, now);
    if (this.returnedAt.size >= this.pruneAt) {
      for (const [id, at] of this.returnedAt) if (now - at > RETURN_MEMORY_MS) this.returnedAt.delete(id);
      this.pruneAt = Math.max(1024, this.returnedAt.size * 2);
    }
    if (this.until.size > 0) this.until.delete(couponId);
  }

  /** This instance's Deduct found stock (a re-check after a missed signal): stop refusing. */
  found(couponId: string): void {
    if (this.until.size > 0) this.until.delete(couponId);
  }
}
