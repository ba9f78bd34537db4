// SaleRepository on MikroORM: the coupon row's sale columns and the audit ledger row change together.
import type { MikroORM } from '@mikro-orm/mysql';
import { LockMode } from '@mikro-orm/core';
import type { SaleRepository, SaleSettings } from '../domain/ports.js';
import { CouponRow, LedgerRow } from './entities.js';

export class MikroSaleRepository implements SaleRepository {
  constructor(private readonly orm: MikroORM) {}

  changeSale(
    couponId: string,
    change: Partial<Pick<SaleSettings, 'startsAt' | 'endsAt' | 'paused'>>,
    audit: { kind: 'SALE_WINDOW' | 'SALE_PAUSE' | 'SALE_RESUME'; reason: string },
  ): Promise<{ sale: SaleSettings; changed: boolean } | null> {
    return this.orm.em.fork().transactional(async (em) => {
      // Locked: two operators changing the same coupon get consecutive revisions, never the same one.
      const row = await em.findOne(
        CouponRow,
        { id: couponId },
        { lockMode: LockMode.PESSIMISTIC_WRITE, fields: ['id', 'saleStartsAt', 'saleEndsAt', 'salePaused', 'saleRevision'] },
      );
      if (!row) return null;
      const current: SaleSettings = {
        startsAt: row.saleStartsAt == null ? null : Number(row.saleStartsAt),
        endsAt: row.saleEndsAt == null ? null : Number(row.saleEndsAt),
        paused: !!row.salePaused,
        revision: row.saleRevision,
      };
      const next: SaleSettings = { ...current, ...change, revision: current.revision + 1 };
      if (next.startsAt === current.startsAt && next.endsAt === current.endsAt && next.paused === current.paused)
        return { sale: current, changed: false };
      await em.nativeUpdate(
        CouponRow,
        { id: couponId },
        {
          saleStartsAt: next.startsAt,
          saleEndsAt: next.endsAt,
          salePaused: next.paused,
          saleRevision: next.revision,
          updatedAt: new Date(),
        },
      );
      const now = Date.now();
      await em.insert(LedgerRow, {
        couponId,
        // Unique per coupon and kind: the revision only grows.
        requestId: `sale-rev-${next.revision}`,
        kind: audit.kind,
        quantity: 0,
        reason: audit.reason || null,
        occurredAt: now,
        settledAt: new Date(now),
        redisApplied: true,
      });
      return { sale: next, changed: true };
    });
  }
}
