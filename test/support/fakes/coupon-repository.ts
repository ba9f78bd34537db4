// CouponRepository in memory: what src/db/coupon-repository.ts keeps in MySQL (coupon rows, the restock
// ledger), with the same idempotency: create returns an existing coupon unchanged, a restock replay returns
// what was recorded. Nothing settles here, so settledRemaining moves only with restocks.
import type { Coupon, CouponRepository, NewCoupon, RestockResult, SaleSettings } from '../../../src/domain/ports.js';

export class FakeCouponRepository implements CouponRepository {
  readonly coupons = new Map<string, Coupon>();
  readonly restocks = new Map<string, { couponId: string; requestId: string; quantity: number; applied: boolean; at: number }>();
  finds = 0;

  async create(c: NewCoupon): Promise<{ coupon: Coupon; created: boolean }> {
    const existing = this.coupons.get(c.id);
    if (existing) return { coupon: { ...existing }, created: false };
    const coupon: Coupon = {
      ...c,
      shardTags: [...c.shardTags],
      totalStock: c.initialStock,
      preheated: false,
      settledRemaining: c.initialStock,
      createdAt: new Date(),
    };
    this.coupons.set(c.id, coupon);
    return { coupon: { ...coupon }, created: true };
  }

  async find(id: string): Promise<Coupon | null> {
    this.finds++;
    const c = this.coupons.get(id);
    return c ? { ...c } : null;
  }

  async page(afterId: string, limit: number): Promise<Coupon[]> {
    return [...this.coupons.values()]
      .filter((c) => c.id > afterId)
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .slice(0, limit)
      .map((c) => ({ ...c }));
  }

  async saleSettings(ids: readonly string[]): Promise<Map<string, SaleSettings>> {
    const out = new Map<string, SaleSettings>();
    for (const id of ids) {
      const sale = this.coupons.get(id)?.sale;
      if (sale) out.set(id, { ...sale });
    }
    return out;
  }

  async markPreheated(id: string): Promise<void> {
    const c = this.coupons.get(id);
    if (c) c.preheated = true;
  }

  async restock(id: string, requestId: string, quantity: number): Promise<RestockResult | null> {
    const c = this.coupons.get(id);
    if (!c) return null;
    const key = `${id}|${requestId}`;
    const prior = this.restocks.get(key);
    if (prior) return { coupon: { ...c }, replayed: true, needsRedis: !prior.applied, quantity: prior.quantity };
    c.totalStock += quantity;
    c.settledRemaining += quantity;
    this.restocks.set(key, { couponId: id, requestId, quantity, applied: false, at: Date.now() });
    return { coupon: { ...c }, replayed: false, needsRedis: true, quantity };
  }

  async markRestockApplied(id: string, requestId: string): Promise<void> {
    const r = this.restocks.get(`${id}|${requestId}`);
    if (r) r.applied = true;
  }

  async unappliedRestocks(olderThanMs: number): Promise<{ couponId: string; requestId: string; quantity: number }[]> {
    const now = Date.now();
    return [...this.restocks.values()]
      .filter((r) => !r.applied && now - r.at >= olderThanMs)
      .map(({ couponId, requestId, quantity }) => ({ couponId, requestId, quantity }));
  }
}
