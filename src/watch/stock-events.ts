// Sold-out and back-in-stock events for waitlist services ("notify me"). After a coupon's changes are
// announced, this instance looks at its level; a mark in Redis says the coupon is sold out. SET NX on the
// mark fires the sold-out event once per crossing however many instances see the coupon empty; the DEL that
// actually removes it (one caller gets 1) fires back-in-stock once when units come back. A shard probe comes
// first (Redis only); the exact level (MySQL total − Redis net deductions, which units moving between shards
// cannot blur) confirms a crossing before any mark changes, so the common case costs no MySQL read.
import type { StockEventMarks } from '../redis/sold-out-marks.js';
import { CouponChecks } from './coupon-checks.js';

export interface StockEvent {
  couponId: string;
  kind: 'sold_out' | 'back_in_stock';
  /** Units available when the crossing was seen. */
  available: number;
  totalStock: number;
  at: string;
}

export interface StockEventDeps {
  /** Σ(available + in transit) over the shards: quick, may be off while units move. */
  probeAvailable(couponId: string): Promise<number>;
  /** The exact level. */
  exactLevel(couponId: string): Promise<{ available: number; totalStock: number }>;
  marks: StockEventMarks;
  publish(event: StockEvent): void;
  onError(what: string, err: unknown): void;
}

export class StockEventDetector {
  private readonly checks: CouponChecks;
  events = 0;

  constructor(private readonly d: StockEventDeps) {
    this.checks = new CouponChecks(
      (couponId, returned) => this.run(couponId, returned),
      (err) => this.d.onError('stock-event check', err),
    );
  }

  check(couponId: string, returned: boolean): void {
    this.checks.check(couponId, returned);
  }

  /** Checks in progress (for tests and shutdown). */
  get busy(): number {
    return this.checks.busy;
  }

  private async run(couponId: string, returned: boolean): Promise<void> {
    const quick = await this.d.probeAvailable(couponId);
    // Only units given back can end a sell-out; only a probe near zero can start one.
    if (quick > 0 && !returned) return;
    const level = await this.d.exactLevel(couponId);
    if (level.available === 0) {
      if (await this.d.marks.markSoldOut(couponId)) this.emit(couponId, 'sold_out', level);
    } else if (returned && (await this.d.marks.clearSoldOut(couponId))) {
      this.emit(couponId, 'back_in_stock', level);
    }
  }

  private emit(couponId: string, kind: StockEvent['kind'], level: { available: number; totalStock: number }): void {
    this.events++;
    this.d.publish({ couponId, kind, available: level.available, totalStock: level.totalStock, at: new Date().toISOString() });
  }
}
