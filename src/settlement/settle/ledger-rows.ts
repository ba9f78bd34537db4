// The ledger rows of settled events, written the one way both settlement paths write them (the careful path
// in ledger-store.ts, the fast path in fast-settle.ts): INSERT IGNORE, so a row already there is skipped
// rather than failing the transaction, and the caller compares the count with what it meant to insert.
import type { EntityManager } from '@mikro-orm/mysql';
import { CONFIRMED_HOLD, LEDGER_KIND } from '../event.js';
import type { Planned } from './settle-plan.js';

/** Inserts one statement of ledger rows (settled at `now`); answers how many were new. */
export async function insertLedgerRows<T>(em: EntityManager, couponId: string, part: readonly Planned<T>[], now: Date): Promise<number> {
  const params: unknown[] = [];
  for (const { event: e } of part) {
    params.push(
      couponId,
      e.requestId,
      LEDGER_KIND[e.kind],
      e.quantity,
      e.userId || null,
      e.shard,
      // A deduction's row keeps only the mark of a confirmed hold (a recovery reads it back).
      e.kind === 'C' ? e.reason.slice(0, 256) : e.reason === CONFIRMED_HOLD ? CONFIRMED_HOLD : null,
      e.occurredAt,
      now,
    );
  }
  const r = await em.execute<{ affectedRows: number }>(
    `insert ignore into stock_ledger (coupon_id, request_id, kind, quantity, user_id, shard, reason, occurred_at, settled_at, redis_applied) values ${Array.from({ length: part.length }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, 1)').join(', ')}`,
    params,
    'run',
  );
  return r.affectedRows;
}
