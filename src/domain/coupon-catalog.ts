// Coupon definitions (shards, tags, limit) never change after creation, so each instance keeps them in
// memory: the Deduct hot path never touches MySQL. The sale settings (window, pause) do change: they are
// applied when announced (src/domain/sale.ts) and re-read in the background at most every few seconds per
// coupon, off the hot path, so a lost announcement heals. Unknown ids are remembered briefly so a flood of calls for
// a coupon that does not exist cannot turn into a flood of queries.
import { notFound, unavailable } from './errors.js';
import type { Coupon, CouponRepository, SaleSettings } from './ports.js';

const MISSING_TTL_MS = 1000;
/** How often a served coupon's sale settings are re-read from MySQL (in the background). */
const SALE_REFRESH_MS = 5000;
const MAX_ENTRIES = 100_000;

export class CouponCatalog {
  private readonly known = new Map<string, Coupon>();
  private readonly missing = new Map<string, number>();
  private readonly loading = new Map<string, Promise<Coupon | null>>();
  private readonly checkedAt = new Map<string, number>();

  constructor(private readonly repo: CouponRepository) {}

  async get(id: string): Promise<Coupon> {
    const hit = this.known.get(id);
    if (hit) {
      const checked = this.checkedAt.get(id) ?? 0;
      if (Date.now() - checked > SALE_REFRESH_MS) this.refreshSale(id);
      return hit;
    }
    const missUntil = this.missing.get(id);
    if (missUntil !== undefined && missUntil > Date.now()) throw notFound(`coupon ${id} does not exist`);
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.repo.find(id).finally(() => this.loading.delete(id));
      this.loading.set(id, pending);
    }
    let coupon: Coupon | null;
    try {
      coupon = await pending;
    } catch (err) {
      throw unavailable('the database cannot be reached', err);
    }
    if (!coupon) {
      if (this.missing.size > MAX_ENTRIES) this.missing.clear();
      this.missing.set(id, Date.now() + MISSING_TTL_MS);
      throw notFound(`coupon ${id} does not exist`);
    }
    this.remember(coupon);
    return this.known.get(id) ?? coupon;
  }

  remember(coupon: Coupon): void {
    if (this.known.size > MAX_ENTRIES) {
      this.known.clear();
      this.checkedAt.clear();
    }
    const held = this.known.get(coupon.id)?.sale;
    // A newer sale change may have been announced while this copy was read.
    this.known.set(coupon.id, held && coupon.sale && held.revision > coupon.sale.revision ? { ...coupon, sale: held } : coupon);
    this.checkedAt.set(coupon.id, Date.now());
    this.missing.delete(coupon.id);
  }

  /** Takes a sale change if it is newer than the one held (announcements may arrive late or twice). */
  applySale(id: string, sale: SaleSettings): void {
    const c = this.known.get(id);
    if (!c || (c.sale && c.sale.revision >= sale.revision)) return;
    this.known.set(id, { ...c, sale });
  }

  private refreshSale(id: string): void {
    this.checkedAt.set(id, Date.now());
    this.repo
      .find(id)
      .then((c) => {
        if (c?.sale) this.applySale(id, c.sale);
      })
      // The next refresh tries again; announcements keep working meanwhile.
      .catch(() => {});
  }

  /** Coupons this instance has served: what its sweepers look after. */
  active(): Coupon[] {
    return [...this.known.values()];
  }
}
