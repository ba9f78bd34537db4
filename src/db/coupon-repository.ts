// CouponRepository on MikroORM: a fresh EntityManager fork per unit of work. Every read of coupon rows outside
// a settlement transaction is here (settlement's LedgerStore and the live page's list delegate to it).
import type { MikroORM } from '@mikro-orm/mysql';
import { DeadlockException, LockMode, LockWaitTimeoutException, UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Coupon, CouponRepository, NewCoupon, RestockOverCap, RestockResult, SaleSettings } from '../domain/ports.js';
import { CouponRow, LedgerRow } from './entities.js';

const RESTOCK_ATTEMPTS = 5;

/** A coupon row as the domain sees it (bigint columns as numbers). */
export function toCoupon(row: {
  id: string;
  initialStock: number;
  totalStock: number;
  shardCount: number;
  perUserLimit: number;
  shardTags: string[];
  preheated: boolean;
  settledRemaining: number;
  createdAt: Date;
  saleStartsAt?: number | null | undefined;
  saleEndsAt?: number | null | undefined;
  salePaused?: boolean | undefined;
  saleRevision?: number | undefined;
}): Coupon {
  return {
    id: row.id,
    initialStock: Number(row.initialStock),
    totalStock: Number(row.totalStock),
    shardCount: row.shardCount,
    perUserLimit: row.perUserLimit,
    shardTags: row.shardTags,
    preheated: !!row.preheated,
    settledRemaining: Number(row.settledRemaining),
    createdAt: row.createdAt,
    sale: {
      startsAt: row.saleStartsAt == null ? null : Number(row.saleStartsAt),
      endsAt: row.saleEndsAt == null ? null : Number(row.saleEndsAt),
      paused: !!row.salePaused,
      revision: row.saleRevision ?? 0,
    },
  };
}

export class MikroCouponRepository implements CouponRepository {
  constructor(private readonly orm: MikroORM) {}

  async create(c: NewCoupon): Promise<{ coupon: Coupon; created: boolean }> {
    const em = this.orm.em.fork();
    const now = new Date();
    try {
      await em.insert(CouponRow, {
        id: c.id,
        initialStock: c.initialStock,
        totalStock: c.initialStock,
        shardCount: c.shardCount,
        perUserLimit: c.perUserLimit,
        shardTags: c.shardTags,
        preheated: false,
        settledRemaining: c.initialStock,
        createdAt: now,
        updatedAt: now,
        version: 1,
        saleStartsAt: c.startsAt ?? null,
        saleEndsAt: c.endsAt ?? null,
      });
      const coupon = await this.find(c.id);
      return { coupon: coupon!, created: true };
    } catch (err) {
      if (!(err instanceof UniqueConstraintViolationException)) throw err;
      const existing = await this.find(c.id);
      if (!existing) throw err;
      return { coupon: existing, created: false };
    }
  }

  async find(id: string): Promise<Coupon | null> {
    const row = await this.orm.em.fork().findOne(CouponRow, { id });
    return row ? toCoupon(row) : null;
  }

  async saleSettings(ids: readonly string[]): Promise<Map<string, SaleSettings>> {
    const out = new Map<string, SaleSettings>();
    if (ids.length === 0) return out;
    // One plain statement, not the query builder: thousands of coupons are re-read this way every few
    // seconds, and the builder's per-parameter processing of 500 ids was most of the query's CPU.
    const rows = (await this.orm.em
      .fork()
      .getConnection()
      .execute(
        `select id, sale_starts_at, sale_ends_at, sale_paused, sale_revision from coupon where id in (${ids.map(() => '?').join(',')})`,
        [...ids],
        'all',
      )) as {
      id: string;
      sale_starts_at: number | string | null;
      sale_ends_at: number | string | null;
      sale_paused: number | boolean;
      sale_revision: number | null;
    }[];
    for (const r of rows)
      out.set(r.id, {
        startsAt: r.sale_starts_at == null ? null : Number(r.sale_starts_at),
        endsAt: r.sale_ends_at == null ? null : Number(r.sale_ends_at),
        paused: !!r.sale_paused,
        revision: Number(r.sale_revision ?? 0),
      });
    return out;
  }

  /** Coupons created or settled since `sinceMs`: whose outboxes may hold events no live instance knows of. */
  async recentlyActive(sinceMs: number, limit: number): Promise<Coupon[]> {
    const since = new Date(sinceMs);
    const rows = await this.orm.em
      .fork()
      .find(
        CouponRow,
        { $or: [{ updatedAt: { $gte: since } }, { createdAt: { $gte: since } }] },
        { orderBy: { updatedAt: 'desc' }, limit },
      );
    return rows.map(toCoupon);
  }

  /** One page of all coupons by id, for a slow walk over every coupon. */
  async page(afterId: string, limit: number): Promise<Coupon[]> {
    const rows = await this.orm.em.fork().find(CouponRow, { id: { $gt: afterId } }, { orderBy: { id: 'asc' }, limit });
    return rows.map(toCoupon);
  }

  /** The most recently created coupons, only the columns a list shows. */
  async newest(limit: number): Promise<Pick<Coupon, 'id' | 'totalStock' | 'shardCount' | 'createdAt'>[]> {
    const rows = await this.orm.em
      .fork()
      .find(CouponRow, {}, { orderBy: { createdAt: 'desc' }, limit, fields: ['id', 'totalStock', 'shardCount', 'createdAt'] });
    return rows.map((r) => ({ id: r.id, totalStock: Number(r.totalStock), shardCount: r.shardCount, createdAt: r.createdAt }));
  }

  async markPreheated(id: string): Promise<void> {
    await this.orm.em.fork().nativeUpdate(CouponRow, { id }, { preheated: true });
  }

  /**
   * The row is locked for the transaction: settlement commits to the same row all through a sale, and an
   * optimistic read-then-write lost to each of them (and to other restocks) with an OptimisticLockError, which
   * reached the caller as UNAVAILABLE. A deadlock or a lock wait timeout is retried here as well.
   */
  async restock(id: string, requestId: string, quantity: number, cap: number): Promise<RestockResult | RestockOverCap | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.restockOnce(id, requestId, quantity, cap);
      } catch (err) {
        const again = err instanceof DeadlockException || err instanceof LockWaitTimeoutException;
        if (!again || attempt >= RESTOCK_ATTEMPTS) throw err;
      }
    }
  }

  private restockOnce(id: string, requestId: string, quantity: number, cap: number): Promise<RestockResult | RestockOverCap | null> {
    return this.orm.em.fork().transactional(async (em) => {
      const coupon = await em.findOne(CouponRow, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!coupon) return null;
      // Looked up before the cap so that a replay is answered as recorded even once the total is near the cap;
      // the row lock above orders this against another call with the same request id.
      const prior = await em.findOne(LedgerRow, { couponId: id, requestId, kind: 'RESTOCK' });
      if (prior) return { coupon: toCoupon(coupon), replayed: true, needsRedis: !prior.redisApplied, quantity: Number(prior.quantity) };
      // Stock figures are summed as doubles in the service and in Lua: past 2^53 a unit could be lost or
      // made up without any error, so the total stays far below it.
      const wouldBe = Number(coupon.totalStock) + quantity;
      if (wouldBe > cap) return { overCap: true, wouldBe };
      const inserted = await em
        .createQueryBuilder(LedgerRow)
        .insert({ couponId: id, requestId, kind: 'RESTOCK', quantity, occurredAt: Date.now(), settledAt: new Date(), redisApplied: false })
        .onConflict(['couponId', 'requestId', 'kind'])
        .ignore()
        .execute('run');
      if ((inserted as { affectedRows: number }).affectedRows === 0) {
        const prior = await em.findOneOrFail(LedgerRow, { couponId: id, requestId, kind: 'RESTOCK' });
        return { coupon: toCoupon(coupon), replayed: true, needsRedis: !prior.redisApplied, quantity: Number(prior.quantity) };
      }
      coupon.totalStock = Number(coupon.totalStock) + quantity;
      coupon.settledRemaining = Number(coupon.settledRemaining) + quantity;
      coupon.updatedAt = new Date();
      // Flushed by transactional() under the row lock; the version bump makes a settlement that read the row
      // before it retry instead of overwriting this increment.
      return { coupon: toCoupon(coupon), replayed: false, needsRedis: true, quantity };
    });
  }

  async markRestockApplied(id: string, requestId: string): Promise<void> {
    await this.orm.em.fork().nativeUpdate(LedgerRow, { couponId: id, requestId, kind: 'RESTOCK' }, { redisApplied: true });
  }

  async unappliedRestocks(olderThanMs: number) {
    const rows = await this.orm.em
      .fork()
      .find(LedgerRow, { kind: 'RESTOCK', redisApplied: false, occurredAt: { $lt: Date.now() - olderThanMs } }, { limit: 100 });
    return rows.map((r) => ({ couponId: r.couponId, requestId: r.requestId, quantity: Number(r.quantity) }));
  }
}
