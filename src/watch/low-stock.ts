// Low-stock events: after a coupon's changes are announced, its available units are compared with its
// threshold. A mark in Redis (SET NX) makes the event fire once per crossing however many instances see
// the coupon below; stock coming back above the threshold (Compensate, Restock) removes the mark, arming
// the next crossing. Runs off the hot path, on the probes level-checks.ts schedules.
import type { LowStockThreshold } from '../config.js';
import type { Coupon } from '../domain/ports.js';
import type { LowStockEvent } from './level-bus.js';
import type { LevelCheck } from './level-checks.js';

export interface LowStockMarks {
  /** Sets the mark; true when it was not set (this call saw the crossing first). */
  trip(couponId: string): Promise<boolean>;
  /** Removes the mark. */
  rearm(couponId: string): Promise<void>;
}

export interface LowStockDeps {
  marks: LowStockMarks;
  publish(event: LowStockEvent): void;
  global: LowStockThreshold;
  overrides: ReadonlyMap<string, LowStockThreshold>;
}

/** Units at or below which a coupon counts as low; 0 = no threshold. */
export function thresholdUnits(t: LowStockThreshold, totalStock: number): number {
  return t.kind === 'units' ? t.value : Math.ceil((totalStock * t.value) / 100);
}

/** Coupons remembered as seen low at most (beyond it the set starts over: a few extra probes). */
const MAX_LOW = 100_000;

export class LowStockDetector implements LevelCheck {
  events = 0;
  /** Coupons a probe here last saw at or below their threshold: until units come back, further falls
   * cannot be a new crossing, so their estimates need not bring a probe forward. */
  private readonly low = new Set<string>();

  constructor(private readonly d: LowStockDeps) {}

  threshold(coupon: Pick<Coupon, 'id' | 'totalStock'>): number {
    const t = this.d.overrides.get(coupon.id) ?? this.d.global;
    return t.value > 0 ? thresholdUnits(t, coupon.totalStock) : 0;
  }

  mayCross(coupon: Coupon, estimate: number): boolean {
    const threshold = this.threshold(coupon);
    return threshold > 0 && estimate <= threshold && !this.low.has(coupon.id);
  }

  async run(coupon: Coupon, available: number, returned: boolean): Promise<void> {
    const threshold = this.threshold(coupon);
    if (threshold <= 0) return;
    if (available > threshold) {
      this.low.delete(coupon.id);
      if (returned) await this.d.marks.rearm(coupon.id);
      return;
    }
    if (this.low.size >= MAX_LOW) this.low.clear();
    this.low.add(coupon.id);
    if (await this.d.marks.trip(coupon.id)) {
      this.events++;
      this.d.publish({ couponId: coupon.id, available, threshold, totalStock: coupon.totalStock, at: new Date().toISOString() });
    }
  }
}
