// The MySQL side of a coupon recovery: the per-coupon lease, restocks not yet credited to Redis, the ledger
// rows a rebuilt shard's records and user counts come from, and the REPAIR rows that record what changed.
import type { MikroORM } from '@mikro-orm/mysql';
import { ANOMALY, LedgerRow } from './entities.js';

export interface LedgerDeduction {
  requestId: string;
  userId: string;
  quantity: number;
  shard: number;
  occurredAt: number;
  /** The ledger row's reason: for a deduction, set only when it confirmed a hold (src/settlement/event.ts
   * CONFIRMED_HOLD). */
  reason?: string | null;
}

/** A deduction Redis made and settlement refused (MySQL could not cover it): no ledger row, an anomaly row. */
export interface RefusedDeduction extends LedgerDeduction {
  /** Its compensation has settled (an anomaly row of its own: there was nothing to give back). */
  compensated: boolean;
}

/** An event in flight as the user counts need it (settlement/event.ts SettlementEvent has these fields). */
export interface InFlightUnits {
  kind: 'D' | 'C';
  requestId: string;
  userId: string;
  quantity: number;
}

export class RecoveryRepository {
  constructor(private readonly orm: MikroORM) {}

  /** Takes the coupon's recovery lease unless another holder's is still running. */
  async acquireLease(couponId: string, token: string, leaseMs: number): Promise<boolean> {
    const now = Date.now();
    const n = await this.orm.em
      .fork()
      .getConnection()
      .execute(
        'update coupon set recovery_owner = ?, recovery_until = ? where id = ? and (recovery_until is null or recovery_until < ? or recovery_owner = ?)',
        [token, now + leaseMs, couponId, now, token],
        'run',
      );
    return (n as unknown as { affectedRows: number }).affectedRows === 1;
  }

  async releaseLease(couponId: string, token: string, completed: boolean): Promise<void> {
    await this.orm.em
      .fork()
      .getConnection()
      .execute(
        `update coupon set recovery_owner = null, recovery_until = null, recovery_epoch = recovery_epoch + ? where id = ? and recovery_owner = ?`,
        [completed ? 1 : 0, couponId, token],
        'run',
      );
  }

  async markRestocksApplied(couponId: string, requestIds: string[]): Promise<void> {
    if (requestIds.length === 0) return;
    await this.orm.em.fork().nativeUpdate(LedgerRow, { couponId, kind: 'RESTOCK', requestId: { $in: requestIds } }, { redisApplied: true });
  }

  /** Settled deductions since `sinceMs` and the request ids of settled compensations since then. */
  async settledSince(couponId: string, sinceMs: number): Promise<{ deductions: LedgerDeduction[]; compensated: Set<string> }> {
    const conn = this.orm.em.fork().getConnection();
    const rows = await conn.execute<
      {
        request_id: string;
        user_id: string | null;
        quantity: string | number;
        shard: number | null;
        occurred_at: string | number;
        kind: string;
        reason: string | null;
      }[]
    >(
      `select request_id, user_id, quantity, shard, occurred_at, kind, reason from stock_ledger
        where coupon_id = ? and kind in ('DEDUCT', 'COMPENSATE') and occurred_at >= ?`,
      [couponId, sinceMs],
    );
    const deductions: LedgerDeduction[] = [];
    const compensated = new Set<string>();
    for (const r of rows) {
      if (r.kind === 'COMPENSATE') compensated.add(r.request_id);
      else
        deductions.push({
          requestId: r.request_id,
          userId: r.user_id ?? '',
          quantity: Number(r.quantity),
          shard: r.shard ?? 0,
          occurredAt: Number(r.occurred_at),
          reason: r.reason,
        });
    }
    return { deductions, compensated };
  }

  /** Every refused deduction of the coupon, over its life (few: each is an oversold unit an operator sees). */
  async refusedDeductions(couponId: string): Promise<RefusedDeduction[]> {
    const rows = await this.orm.em
      .fork()
      .getConnection()
      .execute<
        {
          request_id: string;
          user_id: string | null;
          quantity: string | number;
          shard: number | null;
          occurred_at: string | number;
          compensated: string | number;
        }[]
      >(
        `select d.request_id, d.user_id, d.quantity, d.shard,
                coalesce(d.occurred_at, floor(unix_timestamp(d.created_at) * 1000)) as occurred_at,
                exists(select 1 from settlement_anomaly c
                        where c.coupon_id = d.coupon_id and c.reason = ? and c.request_id = d.request_id) as compensated
           from settlement_anomaly d
          where d.coupon_id = ? and d.reason = ? and d.request_id is not null`,
        [ANOMALY.ofRefused, couponId, ANOMALY.refused],
      );
    return rows.map((r) => ({
      requestId: r.request_id,
      userId: r.user_id ?? '',
      quantity: Number(r.quantity),
      shard: r.shard ?? 0,
      occurredAt: Number(r.occurred_at),
      compensated: Number(r.compensated) === 1,
    }));
  }

  /**
   * Units each user holds of the coupon: deducted minus compensated by the ledger, over the coupon's life, plus
   * the events given (read in flight: outbox, stream) that the ledger does not have. Both from one snapshot: an
   * event can be in flight and settled at once (published and settled, not yet deleted from the outbox or the
   * stream, or settled since it was read), and counted from both sides a settled compensation let its buyer
   * past the limit.
   */
  async userHoldings(couponId: string, inFlight: InFlightUnits[] = []): Promise<Map<string, number>> {
    return this.orm.em.fork().transactional(async (em) => {
      const rows = await em.execute<{ user_id: string; held: string | number }[]>(
        `select user_id, sum(case when kind = 'DEDUCT' then quantity else -quantity end) as held from stock_ledger
          where coupon_id = ? and kind in ('DEDUCT', 'COMPENSATE') and user_id is not null and user_id <> '' group by user_id`,
        [couponId],
      );
      const held = new Map(rows.map((r) => [r.user_id, Number(r.held)]));
      const ids = [...new Set(inFlight.map((e) => e.requestId))];
      const settled = new Set<string>();
      for (let i = 0; i < ids.length; i += 1000) {
        const part = ids.slice(i, i + 1000);
        const found = await em.execute<{ request_id: string; kind: string }[]>(
          `select request_id, kind from stock_ledger where coupon_id = ? and kind in ('DEDUCT', 'COMPENSATE')
            and request_id in (${part.map(() => '?').join(', ')})`,
          [couponId, ...part],
        );
        for (const f of found) settled.add(`${f.kind === 'DEDUCT' ? 'D' : 'C'}|${f.request_id}`);
      }
      for (const e of inFlight) {
        if (!e.userId || settled.has(`${e.kind}|${e.requestId}`)) continue;
        held.set(e.userId, (held.get(e.userId) ?? 0) + (e.kind === 'D' ? e.quantity : -e.quantity));
      }
      return held;
    });
  }

  /** One REPAIR row: `units` added to Redis (negative: taken away), with the reason. */
  async recordRepair(couponId: string, token: string, units: number, reason: string): Promise<void> {
    const now = Date.now();
    await this.orm.em.fork().insert(LedgerRow, {
      couponId,
      requestId: `repair:${token}`.slice(0, 128),
      kind: 'REPAIR',
      quantity: units,
      userId: null,
      shard: null,
      reason: reason.slice(0, 256),
      occurredAt: now,
      settledAt: new Date(now),
      redisApplied: true,
    });
  }
}
