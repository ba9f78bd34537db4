// The most recent coupons, for the live page's list (not a use case: a read-only view of the record).
import type { MikroORM } from '@mikro-orm/mysql';
import type { CouponSummary } from '../ui/ui-routes.js';
import { CouponRow } from './entities.js';

export async function listRecentCoupons(orm: MikroORM, limit: number): Promise<CouponSummary[]> {
  const rows = await orm.em
    .fork()
    .find(CouponRow, {}, { orderBy: { createdAt: 'desc' }, limit, fields: ['id', 'totalStock', 'shardCount', 'createdAt'] });
  return rows.map((r) => ({
    couponId: r.id,
    totalStock: Number(r.totalStock),
    shardCount: r.shardCount,
    createdAt: r.createdAt.toISOString(),
  }));
}
