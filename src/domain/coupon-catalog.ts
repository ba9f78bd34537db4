// Coupon definitions (shards, tags, limit) never change after creation, so each instance keeps them in
// memory: the Deduct hot path never touches MySQL. Unknown ids are remembered briefly so a flood of calls for
// a coupon that does not exist cannot turn into a flood of queries.
import { notFound, unavailable } from './errors.js';
import type { Coupon, CouponRepository } from './ports.js';

const MISSING_TTL_MS = 1000;
const MAX_ENTRIES = 100_000;

export class CouponCatalog {
  private readonly known = new Map<string, Coupon>();
  private readonly missing = new Map<string, number>();
  private readonly loading = new Map<string, Promise<Coupon | null>>();

  constructor(private readonly repo: CouponRepository) {}

  async get(id: string): Promise<Coupon> {
    const hit = this.known.get(id);
    if (hit) return hit;
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
    return coupon;
  }

  remember(coupon: Coupon): void {
    if (this.known.size > MAX_ENTRIES) this.known.clear();
    this.known.set(coupon.id, coupon);
    this.missing.delete(coupon.id);
  }

  /** Coupons this instance has served: what its sweepers look after. */
  active(): Coupon[] {
    return [...this.known.values()];
  }
}
