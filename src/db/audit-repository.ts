// Read-only queries behind the audit API: ledger and anomaly pages by keyset on id (stable under concurrent
// inserts, no OFFSET scans), and the rows of one request. The ledger is indexed by (coupon, kind[, time]);
// a page filtered by user scans the coupon's rows in id order.
import type { MikroORM } from '@mikro-orm/mysql';
import type { AnomalyRecord, AuditRecords, LedgerFilter, LedgerRecord } from '../audit/audit-service.js';
import { AnomalyRow, LedgerRow, type LedgerKind } from './entities.js';

type LedgerRowShape = {
  id: number;
  couponId: string;
  requestId: string;
  /** The enum column's inferred type is wider than its values. */
  kind: unknown;
  quantity: number;
  userId?: string | null | undefined;
  shard?: number | null | undefined;
  reason?: string | null | undefined;
  occurredAt: number;
  settledAt: Date;
};

const ledgerRecord = (r: LedgerRowShape): LedgerRecord => ({
  id: Number(r.id),
  couponId: r.couponId,
  requestId: r.requestId,
  kind: String(r.kind) as LedgerKind,
  quantity: Number(r.quantity),
  userId: r.userId ?? '',
  shard: r.shard ?? -1,
  reason: r.reason ?? '',
  occurredAt: Number(r.occurredAt),
  settledAt: r.settledAt,
});

const anomalyRecord = (r: {
  id: number;
  eventId: string;
  couponId?: string | null | undefined;
  requestId?: string | null | undefined;
  kind?: string | null | undefined;
  quantity: number;
  shard?: number | null | undefined;
  reason: string;
  detail: string;
  refunded: boolean;
  createdAt: Date;
}): AnomalyRecord => ({
  id: Number(r.id),
  eventId: r.eventId,
  couponId: r.couponId ?? '',
  requestId: r.requestId ?? '',
  kind: r.kind ?? '',
  quantity: Number(r.quantity),
  shard: r.shard ?? -1,
  reason: r.reason,
  detail: r.detail,
  refunded: !!r.refunded,
  createdAt: r.createdAt,
});

export class MikroAuditRecords implements AuditRecords {
  constructor(private readonly orm: MikroORM) {}

  async ledgerPage(f: LedgerFilter, afterId: number, limit: number): Promise<LedgerRecord[]> {
    const where: Record<string, unknown> = { couponId: f.couponId, id: { $gt: afterId } };
    if (f.kinds.length > 0) where.kind = { $in: f.kinds };
    if (f.userId) where.userId = f.userId;
    if (f.since !== null || f.until !== null)
      where.occurredAt = { ...(f.since !== null ? { $gte: f.since } : {}), ...(f.until !== null ? { $lt: f.until } : {}) };
    const rows = await this.orm.em.fork().find(LedgerRow, where, { orderBy: { id: 'asc' }, limit });
    return rows.map(ledgerRecord);
  }

  async anomalyPage(couponId: string | undefined, afterId: number, limit: number): Promise<AnomalyRecord[]> {
    const where: Record<string, unknown> = { id: { $gt: afterId } };
    if (couponId) where.couponId = couponId;
    const rows = await this.orm.em.fork().find(AnomalyRow, where, { orderBy: { id: 'asc' }, limit });
    return rows.map(anomalyRecord);
  }

  async ofRequest(couponId: string, requestId: string): Promise<{ ledger: LedgerRecord[]; anomalies: AnomalyRecord[] }> {
    const em = this.orm.em.fork();
    const [ledger, anomalies] = await Promise.all([
      em.find(LedgerRow, { couponId, requestId, kind: { $in: ['DEDUCT', 'COMPENSATE'] } }, { orderBy: { id: 'asc' } }),
      em.find(AnomalyRow, { couponId, requestId }, { orderBy: { id: 'asc' } }),
    ]);
    return { ledger: ledger.map(ledgerRecord), anomalies: anomalies.map(anomalyRecord) };
  }
}
