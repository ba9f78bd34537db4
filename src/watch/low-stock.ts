// Low-stock events: after a coupon's changes are announced, its available units are compared with its
// threshold. A mark in Redis (SET NX) makes the event fire once per crossing however many instances see
// the coupon below; stock coming back above the threshold (Compensate, Restock) removes the mark, arming
// the next crossing. Runs off the hot path, at most once per coupon per announcement interval.
import type { LowStockThreshold } from '../config.js';
import type { Coupon, StockStore } from '../domain/ports.js';
import { allShards } from '../domain/routing.js';
import type { LowStockEvent } from './level-bus.js';
import { CouponChecks } from './coupon-checks.js';

export interface LowStockMarks {
  /** Sets the mark; true when it was not set (this call saw the crossing first). */
  trip(couponId: string): Promise<boolean>;
  /** Removes the mark. */
  rearm(couponId: string): Promise<void>;
}

export interface LowStockDeps {
  coupon(couponId: string): Promise<Coupon>;
  store: Pick<StockStore, 'probe'>;
  marks: LowStockMarks;
  publish(event: LowStockEvent): void;
  global: LowStockThreshold;
  overrides: ReadonlyMap<string, LowStockThreshold>;
  onError(what: string, err: unknown): void;
}

/** Units at or below which a coupon counts as low; 0 = no threshold. */
export function thresholdUnits(t: LowStockThreshold, totalStock: number): number {
  return t.kind === 'units' ? t.value : Math.ceil((totalStock * t.value) / 100);
}

export class LowStockDetector {
  private readonly checks: CouponChecks;
  events = 0;

  constructor(private readonly d: LowStockDeps) {
    this.checks = new CouponChecks(
      (couponId, returned) => this.run(couponId, returned),
      (err) => this.d.onError('low-stock check', err),
    );
  }

  enabledFor(couponId: string): boolean {
    const t = this.d.overrides.get(couponId) ?? this.d.global;
    return t.value > 0;
  }

  check(couponId: string, returned: boolean): void {
    if (!this.enabledFor(couponId)) return;
    this.checks.check(couponId, returned);
  }

  /** Checks in progress (for tests and shutdown). */
  get busy(): number {
    return this.checks.busy;
  }

  private async run(couponId: string, returned: boolean): Promise<void> {
    const coupon = await this.d.coupon(couponId);
    const threshold = thresholdUnits(this.d.overrides.get(couponId) ?? this.d.global, coupon.totalStock);
    if (threshold <= 0) return;
    const shards = await this.d.store.probe(allShards(coupon));
    const available = shards.reduce((sum, s) => sum + (s.available ?? 0) + s.inTransit, 0);
    if (available > threshold) {
      if (returned) await this.d.marks.rearm(couponId);
      return;
    }
    if (await this.d.marks.trip(couponId)) {
      this.events++;
      this.d.publish({ couponId, available, threshold, totalStock: coupon.totalStock, at: new Date().toISOString() });
    }
  }
}
