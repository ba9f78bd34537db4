// The most recent coupons, for the live page's list (not a use case: a read-only view of the record).
import type { MikroORM } from '@mikro-orm/mysql';
import type { CouponSummary } from '../ui/ui-routes.js';
import { MikroCouponRepository } from './coupon-repository.js';

export async function listRecentCoupons(orm: MikroORM, limit: number): Promise<CouponSummary[]> {
  const rows = await new MikroCouponRepository(orm).newest(limit);
  return rows.map((r) => ({
    couponId: r.id,
    totalStock: r.totalStock,
    shardCount: r.shardCount,
    createdAt: r.createdAt.toISOString(),
  }));
}
