// Sold-out and back-in-stock events for waitlist services ("notify me"). After a coupon's changes are
// announced, this instance looks at its level; a mark in Redis says the coupon is sold out. SET NX on the
// mark fires the sold-out event once per crossing however many instances see the coupon empty; the DEL that
// actually removes it (one caller gets 1) fires back-in-stock once when units come back. A shard probe comes
// first (Redis only, scheduled by level-checks.ts); the exact level (MySQL total − Redis net deductions, which
// units moving between shards cannot blur) confirms a crossing before any mark changes, so the common case
// costs no MySQL read.
import type { Coupon } from '../domain/ports.js';
import type { StockEventMarks } from '../redis/sold-out-marks.js';
import type { LevelCheck } from './level-checks.js';

export interface StockEvent {
  couponId: string;
  kind: 'sold_out' | 'back_in_stock';
  /** Units available when the crossing was seen. */
  available: number;
  totalStock: number;
  at: string;
}

export interface StockEventDeps {
  /** The exact level. */
  exactLevel(couponId: string): Promise<{ available: number; totalStock: number }>;
  marks: StockEventMarks;
  publish(event: StockEvent): void;
}

export class StockEventDetector implements LevelCheck {
  events = 0;

  constructor(private readonly d: StockEventDeps) {}

  /** Only a coupon whose shards may all be empty can have sold out. */
  mayCross(_coupon: Coupon, estimate: number): boolean {
    return estimate <= 0;
  }

  /** `quick`: the probe's Σ(available + in transit), which may be off while units move. */
  async run(coupon: Coupon, quick: number, returned: boolean): Promise<void> {
    // Only units given back can end a sell-out; only a probe near zero can start one.
    if (quick > 0 && !returned) return;
    const level = await this.d.exactLevel(coupon.id);
    if (level.available === 0) {
      if (await this.d.marks.markSoldOut(coupon.id)) this.emit(coupon.id, 'sold_out', level);
    } else if (returned && (await this.d.marks.clearSoldOut(coupon.id))) {
      this.emit(coupon.id, 'back_in_stock', level);
    }
  }

  private emit(couponId: string, kind: StockEvent['kind'], level: { available: number; totalStock: number }): void {
    this.events++;
    this.d.publish({ couponId, kind, available: level.available, totalStock: level.totalStock, at: new Date().toISOString() });
  }
}
