// The fast path of settlement: a batch of one coupon that the careful path (ledger-store.ts) would settle
// whole — every event new, every deduction covered, every compensation's deduction settled — is settled
// without reading the ledger or locking the coupon row first.
//
// One transaction:
//   INSERT IGNORE the ledger rows, 5,000 a statement: every row must be new
//   (compensations whose deduction is not in the batch: their DEDUCT rows must all be in the ledger)
//   UPDATE coupon … settled_remaining - <net>, version + 1
//     WHERE settled_remaining >= <units deducted> AND no anomaly row of the coupon
// and anything else rolls back and leaves the batch to the careful path ("fallback"): a repeat (redelivery),
// a deduction the remaining may not cover, a compensation waiting for its deduction, a coupon with anomalies
// (refused deductions and their compensations are the careful path's to recognise), an unknown coupon.
//
// The bound is on the units deducted, not the net: a batch passes only if no order of its events could take
// the remaining below zero. That is stricter than the careful path (which holds a deduction, pairs it with its
// compensation and retries); whatever is nearer the edge is left to it. The version bump keeps the optimistic
// writers (restock, recovery) from committing over this decision, as after any settlement.
//
// A COMMIT that gets no answer (the connection went away) leaves the outcome unknown: "unknown", and the
// caller settles the batch again through the careful path, whose ledger check makes that idempotent.
import type { EntityManager, MikroORM } from '@mikro-orm/mysql';
import { ledgerKey } from '../../domain/ids.js';
import { insertLedgerRows } from './ledger-rows.js';
import type { Planned } from './settle-plan.js';

export type FastOutcome = 'settled' | 'fallback' | 'unknown';

/** Ledger rows per INSERT statement (9 parameters each: well under the 65,535 placeholders of a statement). */
const INSERT_CHUNK = 5000;

/** The batch is not one the fast path settles whole: rolled back, for the careful path. */
class NotWhole extends Error {
  override name = 'NotWhole';
}

export class FastSettle {
  constructor(protected readonly orm: MikroORM) {}

  async apply<T>(couponId: string, events: readonly Planned<T>[]): Promise<FastOutcome> {
    const shape = batchShape(events);
    if (!shape) return 'fallback';
    let committing = false;
    try {
      await this.transaction(async (em) => {
        await this.settle(em, couponId, events, shape);
        committing = true;
      });
      return 'settled';
    } catch {
      // Past the body only COMMIT can fail. Before it (NotWhole, a lock wait or deadlock, a connection lost
      // mid-way) nothing was committed: the careful path decides, and retries or fails as it does.
      return committing ? 'unknown' : 'fallback';
    }
  }

  /** Runs `body` in a transaction and commits it (a test loses the COMMIT's answer here). */
  protected transaction(body: (em: EntityManager) => Promise<void>): Promise<void> {
    return this.orm.em.fork().transactional(body);
  }

  private async settle<T>(em: EntityManager, couponId: string, events: readonly Planned<T>[], shape: BatchShape): Promise<void> {
    const now = new Date();
    // Rows first, the coupon row last: transactions of one coupon overlap their inserts and queue only for
    // the UPDATE and the COMMIT (as the careful path locks late).
    for (let i = 0; i < events.length; i += INSERT_CHUNK) {
      const part = events.slice(i, i + INSERT_CHUNK);
      const inserted = await insertLedgerRows(em, couponId, part, now);
      if (inserted !== part.length) throw new NotWhole(`${part.length - inserted} of the events were settled before`);
    }

    if (shape.deductionsElsewhere.length > 0) {
      const [found] = await em.execute<{ n: number | string }[]>(
        `select count(*) as n from stock_ledger where coupon_id = ? and kind = 'DEDUCT'
         and request_id in (${shape.deductionsElsewhere.map(() => '?').join(', ')})`,
        [couponId, ...shape.deductionsElsewhere],
      );
      if (Number(found?.n ?? 0) !== shape.deductionsElsewhere.length) throw new NotWhole('a compensation waits for its deduction');
    }

    const moved = await em.execute<{ affectedRows: number }>(
      `update coupon set settled_remaining = settled_remaining - ?, version = version + 1, updated_at = ?
       where id = ? and settled_remaining >= ?
         and not exists (select 1 from settlement_anomaly where coupon_id = ?)`,
      [shape.deducted - shape.compensated, now, couponId, shape.deducted, couponId],
      'run',
    );
    if (moved.affectedRows !== 1) throw new NotWhole('the remaining cannot cover the batch, or the coupon has anomalies');
  }
}

interface BatchShape {
  deducted: number;
  compensated: number;
  /** Request ids of compensations whose deduction is not in the batch: it must be in the ledger already. */
  deductionsElsewhere: string[];
}

/** The batch's sums, or null when it repeats an event (the careful path sorts repeats out). */
function batchShape<T>(events: readonly Planned<T>[]): BatchShape | null {
  const keys = new Set<string>();
  let deducted = 0;
  let compensated = 0;
  for (const { event: e } of events) {
    const k = ledgerKey(e.kind, e.requestId);
    if (keys.has(k)) return null;
    keys.add(k);
    if (e.kind === 'D') deducted += e.quantity;
    else compensated += e.quantity;
  }
  const deductionsElsewhere: string[] = [];
  for (const { event: e } of events) {
    if (e.kind === 'C' && !keys.has(ledgerKey('D', e.requestId))) deductionsElsewhere.push(e.requestId);
  }
  return { deducted, compensated, deductionsElsewhere };
}
