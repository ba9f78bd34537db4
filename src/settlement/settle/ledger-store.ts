// The MySQL side of settlement, on MikroORM: per batch of one coupon ONE transaction that inserts the batch's
// ledger rows (INSERT IGNORE on the unique (coupon, request, kind) key, every planned row must be new) and
// moves the coupon's settled remaining under its `version`, the row locked for the update (see applyBatch);
// anomaly rows; and the reads Reconcile needs.
//
// Every transaction that decides something about a coupon's events bumps the coupon's version, so a writer
// that did not take the lock (recovery, restock: optimistic) cannot commit a decision over a settlement's.
// Two settlements of the same events cannot both commit: the second INSERT finds the first's rows (it waits
// for their commit), inserts fewer than planned, and starts over.
import { DeadlockException, LockMode, LockWaitTimeoutException, OptimisticLockError } from '@mikro-orm/core';
import type { EntityManager, MikroORM } from '@mikro-orm/mysql';
import { ANOMALY, AnomalyRow, CouponRow, LedgerRow } from '../../db/entities.js';
import type { Coupon } from '../../domain/ports.js';
import { ledgerKey } from '../../domain/ids.js';
import { eventId, LEDGER_KIND, type SettlementEvent } from '../event.js';
import { insertLedgerRows } from './ledger-rows.js';
import { planBatch, type Plan, type Planned } from './settle-plan.js';
import { MikroCouponRepository, toCoupon } from '../../db/coupon-repository.js';

export { ANOMALY };

export interface BatchResult<T> {
  /** null: the coupon does not exist. */
  coupon: Coupon | null;
  plan: Plan<T>;
  /** Held deductions refused in this transaction (refuseHeld): each is a new anomaly, to count, to repair and
   * to mark refused in Redis. */
  refused: Planned<T>[];
  /** Deductions refused earlier and delivered again (a lost ack, a republish): only their Redis mark may still
   * be missing (its first try failed); they were counted, and their repair asked for, the first time. */
  refusedAgain: Planned<T>[];
  /** OptimisticLockError (or a concurrent insert) made the transaction start over this many times. */
  retries: number;
}

export interface LedgerSums {
  deducted: number;
  compensated: number;
  restocked: number;
}

export interface ReconcileView {
  coupon: Coupon;
  sums: LedgerSums;
  anomalies: number;
  anomalyUnits: number;
  /** Of the candidate events: those with a ledger row. */
  settled: Set<string>;
  /** Of the candidate events: refused deductions, and compensations of refused deductions. Neither is in
   * flight: MySQL will never apply them, and Redis already holds their final effect. */
  refused: Set<string>;
  /** Restocks committed in MySQL whose shards were not all credited yet (asked for with `restocks`). Read in
   * the same transaction as the coupon row: each is in its remaining exactly when it is listed here. */
  unappliedRestocks: { requestId: string; quantity: number }[];
}

class ConcurrentInsert extends Error {
  override name = 'ConcurrentInsert';
}

/** The remaining, read under the lock, cannot cover what was inserted before it: decide again, lock first. */
class PlanChanged extends Error {
  override name = 'PlanChanged';
}

class UnknownCoupon extends Error {
  override name = 'UnknownCoupon';
}

/** Plenty: no deduction is held when a batch is first planned without the coupon's lock. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER / 4;

const retryable = (err: unknown) =>
  err instanceof OptimisticLockError ||
  err instanceof ConcurrentInsert ||
  err instanceof PlanChanged ||
  err instanceof DeadlockException ||
  err instanceof LockWaitTimeoutException;

const MAX_ATTEMPTS = 30;
const CHUNK = 1000;

function chunks<T>(xs: T[], n = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

/** `?, ?, …` for an IN list of n values. */
const marks = (n: number) => Array.from({ length: n }, () => '?').join(', ');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class LedgerStore {
  private readonly coupons: MikroCouponRepository;

  constructor(private readonly orm: MikroORM) {
    this.coupons = new MikroCouponRepository(orm);
  }

  /**
   * Settles one coupon's batch. refuseHeld: deductions the remaining still cannot cover become anomalies in
   * the same transaction (the settler decided nothing else can make room for them).
   *
   * Lock late: the ledger reads and the INSERT run before the coupon row is locked (SELECT … FOR UPDATE), so
   * several transactions of one coupon overlap their expensive part and queue only for the row update and
   * the commit. The batch is decided again with the remaining read under the lock; if that decision differs
   * from the one the rows were inserted for (the remaining cannot cover every deduction), the transaction
   * starts over with the lock taken first. Refusals (refuseHeld) always lock first.
   */
  /** refuseAtVersion: held deductions are refused only while the coupon row is still at this version (what
   * the caller read before it looked for compensations in flight); after any change they stay held. */
  async applyBatch<T>(couponId: string, events: Planned<T>[], refuseHeld = false, refuseAtVersion?: number): Promise<BatchResult<T>> {
    let lockFirst = refuseHeld;
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await this.orm.em
          .fork()
          .transactional((em) => this.applyOnce(em, couponId, events, refuseHeld, lockFirst, refuseAtVersion));
        return { ...r, retries: attempt };
      } catch (err) {
        if (err instanceof UnknownCoupon) {
          const plan: Plan<T> = { remaining: 0, apply: [], duplicates: [], held: [], waiting: [], ofRefused: [] };
          return { coupon: null, plan, refused: [], refusedAgain: [], retries: attempt };
        }
        if (!retryable(err) || attempt + 1 >= MAX_ATTEMPTS) throw err;
        if (err instanceof PlanChanged) lockFirst = true;
        await sleep(Math.random() * Math.min(50, 2 + attempt * 5));
      }
    }
  }

  private async applyOnce<T>(
    em: EntityManager,
    couponId: string,
    events: Planned<T>[],
    refuseHeldAsked: boolean,
    lockFirst: boolean,
    refuseAtVersion: number | undefined,
  ): Promise<Omit<BatchResult<T>, 'retries'>> {
    let row = lockFirst ? await this.lockCoupon(em, couponId) : null;
    // A refusal rests on a view of the coupon (its remaining, what is settled, what is in flight) read at
    // different moments; it stands only if no settlement came between them.
    const refuseHeld = refuseHeldAsked && (refuseAtVersion === undefined || row?.version === refuseAtVersion);

    // Raw SQL on the transaction's connection for the per-event reads and the insert: hydrating entities and
    // building query-builder inserts cost ~45 µs of CPU per event, most of a batch's transaction time. The
    // ledger rows and the anomalies already recorded (for these events, and the refused deductions their
    // compensations refer to) are read in one round trip: on a busy box round trips set the latency.
    const requestIds = chunks([...new Set(events.map((p) => p.event.requestId))]);
    const lookup = new Set<string>();
    for (const p of events) {
      lookup.add(eventId(p.event));
      if (p.event.kind === 'C') lookup.add(eventId({ ...p.event, kind: 'D' }));
    }
    const eventIds = chunks([...lookup]);
    const settled = new Set<string>();
    const anomalies = new Map<string, string>();
    for (let i = 0; i < Math.max(requestIds.length, eventIds.length); i++) {
      const r = requestIds[i] ?? [];
      const a = eventIds[i] ?? [];
      const rows = await em.execute<{ t: string; k: string; v: string }[]>(
        `select 'L' as t, request_id as k, kind as v from stock_ledger where coupon_id = ? and kind in ('DEDUCT', 'COMPENSATE') and request_id in (${r.length > 0 ? marks(r.length) : 'null'})
         union all
         select 'A', event_id, reason from settlement_anomaly where event_id in (${a.length > 0 ? marks(a.length) : 'null'})`,
        [couponId, ...r, ...a],
      );
      for (const row of rows) {
        if (row.t === 'L') settled.add(ledgerKey(row.v === 'DEDUCT' ? 'D' : 'C', row.k));
        else anomalies.set(row.k, row.v);
      }
    }
    const refusedRequests = new Set<string>();
    const refusedAgain: Planned<T>[] = [];
    const recordedBefore: Planned<T>[] = [];
    const open: Planned<T>[] = [];
    for (const p of events) {
      const reason = anomalies.get(eventId(p.event));
      if (p.event.kind === 'D' && reason === ANOMALY.refused) refusedAgain.push(p);
      else if (reason !== undefined) recordedBefore.push(p);
      else open.push(p);
      if (p.event.kind === 'C' && anomalies.get(eventId({ ...p.event, kind: 'D' })) === ANOMALY.refused)
        refusedRequests.add(p.event.requestId);
    }

    const decide = (remaining: number) => {
      const p = planBatch({ remaining, events: open, settled, refused: refusedRequests });
      p.duplicates.push(...recordedBefore);
      return p;
    };
    let plan = decide(row ? Number(row.settledRemaining) : UNBOUNDED);
    const now = new Date();

    if (plan.apply.length > 0) {
      for (const part of chunks(plan.apply)) {
        const inserted = await insertLedgerRows(em, couponId, part, now);
        // Fewer rows than planned: another settler inserted some since this transaction read the ledger.
        if (inserted !== part.length) throw new ConcurrentInsert(`inserted ${inserted} of ${part.length} ledger rows`);
      }
    }
    if (!row) {
      row = await this.lockCoupon(em, couponId);
      const exact = decide(Number(row.settledRemaining));
      // Decided without a bound, nothing was held; under the real remaining nothing may be either.
      if (exact.held.length > 0 || exact.apply.length !== plan.apply.length) throw new PlanChanged();
      // Nor may a deduction applied here have been refused since the first read: a refusal is written under
      // this coupon's lock, which this transaction holds now, and a locking read sees it where this
      // transaction's snapshot does not. Without it, a copy of a deduction delivered again could settle
      // while another copy was being refused (the unit both sold in MySQL and refused in Redis).
      if (await this.refusedUnderLock(em, exact.apply)) throw new PlanChanged();
      plan = exact;
    }
    const anomalyRows = [
      ...plan.ofRefused.map((p) =>
        anomalyOf(p.event, ANOMALY.ofRefused, `the deduction of request ${p.event.requestId} was refused and its units returned to Redis`),
      ),
      ...(refuseHeld
        ? plan.held.map((p) => anomalyOf(p.event, ANOMALY.refused, `settled remaining ${plan.remaining} cannot cover ${p.event.quantity}`))
        : []),
    ];
    for (const part of chunks(anomalyRows)) {
      await em.createQueryBuilder(AnomalyRow).insert(part).onConflict(['eventId']).ignore().execute('run');
    }
    const refused = refuseHeld ? plan.held : [];
    if (refuseHeld) plan.held = [];
    if (plan.apply.length > 0 || anomalyRows.length > 0) {
      row.settledRemaining = plan.remaining;
      row.updatedAt = now;
      // transactional() flushes: UPDATE ... WHERE id = ? AND version = ?, or OptimisticLockError.
    }
    return { coupon: toCoupon(row), plan, refused, refusedAgain };
  }

  /** Whether any deduction among `applied` has a refusal recorded, read with a locking read (the latest
   * committed rows, not the transaction's snapshot). */
  private async refusedUnderLock<T>(em: EntityManager, applied: Planned<T>[]): Promise<boolean> {
    const ids = applied.filter((p) => p.event.kind === 'D').map((p) => eventId(p.event));
    for (const part of chunks(ids)) {
      const rows = await em.execute<{ n: number | string }[]>(
        `select count(*) as n from settlement_anomaly where reason = ? and event_id in (${marks(part.length)}) lock in share mode`,
        [ANOMALY.refused, ...part],
      );
      if (Number(rows[0]?.n ?? 0) > 0) return true;
    }
    return false;
  }

  /** The coupon row, locked until the transaction ends: the latest committed remaining and version. */
  private async lockCoupon(em: EntityManager, couponId: string) {
    const row = await em.findOne(CouponRow, { id: couponId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!row) throw new UnknownCoupon(couponId);
    return row;
  }

  async noteAnomaly(eventIdValue: string, detail: string): Promise<void> {
    await this.orm.em.fork().nativeUpdate(AnomalyRow, { eventId: eventIdValue }, { detail: detail.slice(0, 10_000) });
  }

  /** A message settlement cannot use (unparsable, unknown coupon), after its bounded redeliveries. */
  async recordPoison(id: string, reason: string, detail: string, e?: SettlementEvent | null): Promise<void> {
    await this.orm.em
      .fork()
      .createQueryBuilder(AnomalyRow)
      .insert({
        eventId: id.slice(0, 255),
        couponId: e?.couponId.slice(0, 64) ?? null,
        requestId: e?.requestId.slice(0, 128) ?? null,
        kind: e ? LEDGER_KIND[e.kind] : null,
        quantity: e?.quantity ?? 0,
        shard: e?.shard ?? null,
        userId: e?.userId ? e.userId.slice(0, 128) : null,
        occurredAt: e?.occurredAt ?? null,
        reason,
        detail: detail.slice(0, 10_000),
        refunded: false,
        createdAt: new Date(),
      })
      .onConflict(['eventId'])
      .ignore()
      .execute('run');
  }

  /** Everything Reconcile reads from MySQL, in one transaction so the figures agree with each other.
   * sums: false skips the ledger sums (the in-flight count needs only which candidates are settled). */
  async reconcileView(couponId: string, candidates: SettlementEvent[], sums = true, restocks = false): Promise<ReconcileView | null> {
    return this.orm.em.fork().transactional(async (em) => {
      const row = await em.findOne(CouponRow, { id: couponId });
      if (!row) return null;
      const totals: LedgerSums = { deducted: 0, compensated: 0, restocked: 0 };
      let anomalies = 0;
      let anomalyUnits = 0;
      if (sums) {
        const bySum = await em.execute<{ kind: string; q: string | number }[]>(
          'select kind, coalesce(sum(quantity), 0) as q from stock_ledger where coupon_id = ? group by kind',
          [couponId],
        );
        for (const s of bySum) {
          if (s.kind === 'DEDUCT') totals.deducted = Number(s.q);
          else if (s.kind === 'COMPENSATE') totals.compensated = Number(s.q);
          else if (s.kind === 'RESTOCK') totals.restocked = Number(s.q);
        }
        const [a] = await em.execute<{ n: string | number; q: string | number }[]>(
          `select count(*) as n, coalesce(sum(case when reason = ? then quantity else 0 end), 0) as q from settlement_anomaly where coupon_id = ?`,
          [ANOMALY.refused, couponId],
        );
        anomalies = Number(a?.n ?? 0);
        anomalyUnits = Number(a?.q ?? 0);
      }
      const settled = new Set<string>();
      const refused = new Set<string>();
      for (const ids of chunks([...new Set(candidates.map((e) => e.requestId))])) {
        for (const l of await em.find(
          LedgerRow,
          { couponId, requestId: { $in: ids }, kind: { $in: ['DEDUCT', 'COMPENSATE'] } },
          { fields: ['requestId', 'kind'] },
        )) {
          settled.add(eventId({ kind: l.kind === 'DEDUCT' ? 'D' : 'C', couponId, requestId: l.requestId }));
        }
      }
      const deductionIds = new Map(candidates.map((e) => [eventId({ ...e, kind: 'D' }), e]));
      for (const ids of chunks([...deductionIds.keys()])) {
        for (const r of await em.find(AnomalyRow, { eventId: { $in: ids }, reason: ANOMALY.refused }, { fields: ['eventId'] })) {
          const e = deductionIds.get(r.eventId)!;
          refused.add(r.eventId);
          refused.add(eventId({ ...e, kind: 'C' }));
        }
      }
      const unappliedRestocks = restocks
        ? (await em.find(LedgerRow, { couponId, kind: 'RESTOCK', redisApplied: false }, { fields: ['requestId', 'quantity'] })).map(
            (r) => ({
              requestId: r.requestId,
              quantity: Number(r.quantity),
            }),
          )
        : [];
      return { coupon: toCoupon(row), sums: totals, anomalies, anomalyUnits, settled, refused, unappliedRestocks };
    });
  }

  /** The coupon row's version: every settlement, restock and recovery that changes the coupon bumps it. */
  async version(couponId: string): Promise<number | null> {
    const rows = await this.orm.em.fork().execute<{ version: number | string }[]>('select version from coupon where id = ?', [couponId]);
    return rows[0] ? Number(rows[0].version) : null;
  }

  find(couponId: string): Promise<Coupon | null> {
    return this.coupons.find(couponId);
  }

  /** Coupons created or settled since `sinceMs`: whose outboxes may hold events no live instance knows of. */
  recentCoupons(sinceMs: number, limit: number): Promise<Coupon[]> {
    return this.coupons.recentlyActive(sinceMs, limit);
  }

  /** One page of all coupons by id, for a slow walk over every coupon. */
  couponPage(afterId: string, limit: number): Promise<Coupon[]> {
    return this.coupons.page(afterId, limit);
  }
}

function anomalyOf(e: SettlementEvent, reason: string, detail: string) {
  return {
    eventId: eventId(e),
    couponId: e.couponId,
    requestId: e.requestId,
    kind: LEDGER_KIND[e.kind],
    quantity: e.quantity,
    shard: e.shard,
    userId: e.userId ? e.userId.slice(0, 128) : null,
    occurredAt: e.occurredAt,
    reason,
    detail,
    refunded: false,
    createdAt: new Date(),
  };
}
