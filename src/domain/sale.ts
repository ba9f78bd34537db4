// Sale windows and the kill switch. A coupon sells from starts_at (inclusive) to ends_at (exclusive) unless
// an operator paused it. The settings live on the coupon row; each instance holds them in its coupon catalog,
// so Deduct decides from memory and a refused call never reaches Redis. A change is written to MySQL with its
// audit ledger row in one transaction, then announced over NATS so every instance applies it within one hop
// (the catalog also re-reads it in the background, which heals a lost announcement).
import { invalid, notFound } from './errors.js';
import type { CouponCatalog } from './coupon-catalog.js';
import type { SaleRepository, SaleSettings, SaleSignals, StockChanges } from './ports.js';
import * as v from './validate.js';

export type SaleStatus = 'open' | 'not_started' | 'ended' | 'paused';

/** Pure: where the sale stands at `nowMs`. A pause wins over the window. */
export function saleStatus(sale: SaleSettings | undefined, nowMs: number): SaleStatus {
  if (!sale) return 'open';
  if (sale.paused) return 'paused';
  if (sale.startsAt !== null && nowMs < sale.startsAt) return 'not_started';
  if (sale.endsAt !== null && nowMs >= sale.endsAt) return 'ended';
  return 'open';
}

export const ALWAYS_OPEN: SaleSettings = { startsAt: null, endsAt: null, paused: false, revision: 0 };

/** A protobuf Timestamp's parts, or undefined when the field was not set. */
export type Instant = { seconds: bigint; nanos: number } | undefined;

/** Both ends validated (names the field); ends_at must come after starts_at. */
export function saleWindow(startsAt: Instant, endsAt: Instant): { startsAt: number | null; endsAt: number | null } {
  const s = v.instant('starts_at', startsAt);
  const e = v.instant('ends_at', endsAt);
  if (s !== null && e !== null && e <= s) throw invalid('ends_at', `must be after starts_at (${new Date(s).toISOString()})`);
  return { startsAt: s, endsAt: e };
}

export interface SaleChangeResult {
  sale: SaleSettings;
  /** False when the coupon already was in that state: nothing was recorded or announced. */
  changed: boolean;
}

export interface SaleControlDeps {
  repo: SaleRepository;
  catalog: CouponCatalog;
  signals: SaleSignals;
  /** Told after a change, so WatchStock streams show it. */
  changes?: StockChanges | undefined;
}

export class SaleControl {
  constructor(private readonly d: SaleControlDeps) {
    d.signals.onSaleChanged((couponId, sale) => d.catalog.applySale(couponId, sale));
  }

  setWindow(input: { couponId: string; startsAt: Instant; endsAt: Instant; reason: string }): Promise<SaleChangeResult> {
    const couponId = v.couponId(input.couponId);
    const window = saleWindow(input.startsAt, input.endsAt);
    const reason = v.text('reason', input.reason, v.REASON_MAX);
    const what = `window ${iso(window.startsAt) ?? 'open'} .. ${iso(window.endsAt) ?? 'no end'}`;
    return this.apply(couponId, window, 'SALE_WINDOW', reason ? `${what}: ${reason}` : what);
  }

  pause(input: { couponId: string; reason: string }): Promise<SaleChangeResult> {
    const couponId = v.couponId(input.couponId);
    return this.apply(couponId, { paused: true }, 'SALE_PAUSE', v.text('reason', input.reason, v.REASON_MAX));
  }

  resume(input: { couponId: string; reason: string }): Promise<SaleChangeResult> {
    const couponId = v.couponId(input.couponId);
    return this.apply(couponId, { paused: false }, 'SALE_RESUME', v.text('reason', input.reason, v.REASON_MAX));
  }

  private async apply(
    couponId: string,
    change: Partial<Pick<SaleSettings, 'startsAt' | 'endsAt' | 'paused'>>,
    kind: 'SALE_WINDOW' | 'SALE_PAUSE' | 'SALE_RESUME',
    reason: string,
  ): Promise<SaleChangeResult> {
    const r = await this.d.repo.changeSale(couponId, change, { kind, reason: reason.slice(0, v.REASON_MAX) });
    if (!r) throw notFound(`coupon ${couponId} does not exist`);
    this.d.catalog.applySale(couponId, r.sale);
    if (r.changed) {
      this.d.signals.saleChanged(couponId, r.sale);
      this.d.changes?.changed(couponId, false);
    }
    return r;
  }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
