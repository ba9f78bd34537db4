// Orders of several items, all or nothing (docs/orders.md): every item is held, one atomic decision on the
// order record says whether they are all confirmed (or kept as holds) or all released, and only then are the
// per-item steps made. Those steps are idempotent, so a retry or the sweeper can repeat them until done.
import { DomainError, invalid } from './errors.js';
import { orderItemRequestId } from './ids.js';
import type { Hold } from './holds.js';
import type { Coupon } from './model.js';
import type {
  HoldKey,
  HoldTake,
  OrderAbort,
  OrderHolds,
  OrderItemSpec,
  OrderKind,
  OrderMoveResult,
  OrderRecord,
  OrderRecords,
  OrderRefused,
} from './ports.js';
import * as v from './validate.js';

export type OrderOutcome =
  /** ReserveOrder: every item is held until expiresAtMs. */
  | 'held'
  /** Every item is deducted. */
  | 'confirmed'
  /** Nothing taken: an item was refused (see `refused`). */
  | 'refused'
  /** Nothing taken: a hold expired before the order could be confirmed. */
  | 'expired'
  /** Nothing taken: the order was released. */
  | 'released'
  /** Nothing taken: the order was left unfinished past its holds' lifetime (its instance died). */
  | 'abandoned'
  /** Every item's deduction was given back. */
  | 'compensated';

export interface OrderItemResult {
  index: number;
  couponId: string;
  quantity: number;
  /** The item's hold: its derived request id (its deduction's request id once confirmed). */
  requestId: string;
  /** The hold as this call last saw it (absent when it was never taken, or could not be read). */
  hold?: Hold;
  /** Compensate on the order: this item's outcome. */
  compensated?: 'compensated' | 'already_compensated' | 'not_deducted';
}

export interface OrderResult {
  orderId: string;
  outcome: OrderOutcome;
  /** The order's decision was made by an earlier call (this one answered from its record). */
  replayed: boolean;
  refused?: OrderRefused;
  /** held: when the first of the holds expires. */
  expiresAtMs?: number;
  items: OrderItemResult[];
}

export interface OrderInput {
  requestId: string;
  userId: string;
  items: { couponId: string; quantity: bigint }[];
  /** 0 = the default hold TTL. */
  ttlMs: bigint | number;
}

export interface OrderSettings {
  maxItems: number;
  maxQuantity: number;
  ttl: { minMs: number; maxMs: number; defaultMs: number };
  /** A commit is made only while every hold has at least this long to live: time to confirm them all, even
   * by a retry or the sweeper after a crash, and room for clock skew between instances. */
  commitMarginMs: number;
  /** The sweeper looks at a committed order this long after the commit (confirms it if its caller died). */
  finishAfterMs: number;
  /** The sweeper waits this long past an expiry before acting on it (holds' own expiry runs first). */
  graceMs: number;
  /** An order still PENDING this long after it was opened (or after its TTL, when shorter) is abandoned by the
   * sweeper: its caller died, and its holds are released rather than left until they expire. */
  abandonAfterMs: number;
}

const ABORT_OUTCOME: Record<OrderAbort, OrderOutcome> = {
  refused: 'refused',
  expired: 'expired',
  released: 'released',
  abandoned: 'abandoned',
};

/** How the sweeper ended an order: abandoned (PENDING, its caller died), finished (COMMITTED, confirms done or
 * undone), expired (HELD past its expiry), tidied (already ended: only the due-list entry), gone (no record). */
export type SweepEnd = 'abandoned' | 'finished' | 'expired' | 'tidied' | 'gone';

export interface OrderStats {
  /** Commits whose holds did not all outlive them (a stall beyond the margin): their confirmed items given back. */
  undoneCommits: number;
}

/** What one call has seen of the items' holds (index -> the latest Hold an answer carried). */
type Seen = (Hold | undefined)[];

export class OrderService {
  readonly stats: OrderStats = { undoneCommits: 0 };

  constructor(
    private readonly d: {
      holds: OrderHolds;
      records: OrderRecords;
      /** The coupon of an item (NOT_FOUND when unknown). */
      coupon: (couponId: string) => Promise<Coupon>;
      settings: OrderSettings;
      now?: () => number;
      onError?: (what: string, err: unknown) => void;
    },
  ) {}

  private now(): number {
    return (this.d.now ?? Date.now)();
  }

  /** Holds every item, or none; the holds stay until confirmed, released or expired. */
  reserveOrder(input: OrderInput, signal?: AbortSignal): Promise<OrderResult> {
    return this.place('reserve', input, signal);
  }

  /** Deducts every item, or none. */
  deductOrder(input: OrderInput, signal?: AbortSignal): Promise<OrderResult> {
    return this.place('deduct', input, signal);
  }

  /** Confirms every hold of a reserved order (or finishes a confirm cut short). */
  async confirmOrder(orderId: string): Promise<OrderResult> {
    const record = await this.existing(orderId);
    if (record.state !== 'held') return this.follow(record, true, []);
    const seen: Seen = [];
    return this.commit(record, await this.lifetime(record, seen), seen);
  }

  /** Releases every hold of an order that is not confirmed. */
  async releaseOrder(orderId: string, reason: string): Promise<OrderResult> {
    v.text('reason', reason, v.REASON_MAX);
    const record = await this.existing(orderId);
    const r = await this.d.records.move(record.orderId, ['pending', 'held'], 'aborted', this.now(), { set: { abort: 'released' } });
    return this.follow(decided(r, record.orderId), r.kind !== 'moved', []);
  }

  /** Moves the expiry of every hold of a reserved order; a hold already ended aborts the order (EXPIRED). */
  async extendOrder(orderId: string, ttlMs: number): Promise<OrderResult> {
    const s = this.d.settings;
    const ttl = ttlMs === 0 ? s.ttl.defaultMs : v.units('ttl_ms', BigInt(ttlMs), BigInt(s.ttl.minMs), BigInt(s.ttl.maxMs));
    const record = await this.existing(orderId);
    if (record.state !== 'held') return this.follow(record, true, []);
    const seen: Seen = [];
    const ends = await this.each(record, async (hold, i) => {
      const r = await this.d.holds.extend(hold, ttl);
      seen[i] = r.hold;
      return r;
    });
    // An item confirmed by its hold id (behind the order's back) is taken, not lost: the order still holds the
    // rest, and a Confirm of the order commits it (as the sweeper would once every item is confirmed). Treating
    // it as expired gave the confirmed units back and ended the order EXPIRED although nothing had expired.
    if (ends.some((e) => e.end !== 'extended' && e.end !== 'confirmed')) return this.abortExpired(record, ['held'], seen);
    const extended = seen.filter((h, i) => ends[i]!.end === 'extended' && h !== undefined);
    if (extended.length === 0) return this.follow(record, true, seen);
    const expiresAtMs = Math.min(...extended.map((h) => h!.expiresAtMs ?? this.now() + ttl));
    // Moving held -> held records the new expiry, which the sweeper goes by; a decision taken meanwhile wins.
    const r = await this.d.records.move(record.orderId, ['held'], 'held', this.now(), { set: { expiresAtMs } });
    if (r.kind === 'moved') await this.d.records.schedule(record.orderId, expiresAtMs + s.graceMs);
    return this.follow(decided(r, record.orderId), false, seen);
  }

  /** Gives back every item of a confirmed order. */
  async compensateOrder(orderId: string, reason: string): Promise<OrderResult & { already: boolean }> {
    const why = v.text('reason', reason, v.REASON_MAX);
    let record = await this.existing(orderId);
    const seen: Seen = [];
    // A confirm cut short is finished first: compensating half an order would leave the other half taken.
    if (record.state === 'committed') record = await this.finishCommit(record, seen);
    if (record.state !== 'confirmed' && record.state !== 'compensated')
      return { ...(await this.follow(record, true, seen)), already: false };
    // Every item first, the record after: an order is COMPENSATED only once each item's units are back. Each
    // compensation is idempotent, so a retry (or a racing call) repeats them harmlessly.
    const outcomes = await this.each(record, (hold) => this.d.holds.compensate(hold, why));
    const missed = outcomes.flatMap((o, i) => (o === 'not_deducted' ? [i] : []));
    if (missed.length > 0) {
      // A confirmed item with no deduction to give back: its record was lost. The order stays confirmed, so a
      // retry once it is repaired compensates the rest; the items given back now stay given back.
      throw new DomainError(
        'failed_precondition',
        `order ${record.orderId} was not compensated: no deduction was found for item ${missed.join(', ')} ` +
          `(${missed.map((i) => record.items[i]!.couponId).join(', ')}); the other items were given back. ` +
          'Retry with the same order_id once the coupon is repaired',
      );
    }
    const r = await this.d.records.move(record.orderId, ['confirmed'], 'compensated', this.now());
    const now = decided(r, record.orderId);
    const answer = await this.answer(now, r.kind !== 'moved', seen);
    answer.items.forEach((item, i) => {
      item.compensated = outcomes[i]!;
    });
    return { ...answer, already: r.kind !== 'moved' };
  }

  /** The sweeper's step for one due order: ends what its caller left unfinished (saying how), or says when to
   * look again. */
  async sweep(orderId: string): Promise<{ nextAtMs: number } | { ended: SweepEnd }> {
    const record = await this.d.records.read(orderId);
    if (!record) return { ended: 'gone' };
    const now = this.now();
    const grace = this.d.settings.graceMs;
    switch (record.state) {
      case 'pending': {
        // Until then a retry can still finish it; aborting a slow but live call is safe (it follows the abort).
        const at = this.pendingDeadline(record);
        if (now < at) return { nextAtMs: at };
        const r = await this.d.records.move(orderId, ['pending'], 'aborted', now, { set: { abort: 'abandoned' } });
        await this.follow(decided(r, orderId), true, []);
        return { ended: r.kind === 'moved' ? 'abandoned' : 'tidied' };
      }
      case 'held': {
        const at = (record.expiresAtMs ?? record.createdMs + record.ttlMs) + grace;
        if (now < at) return { nextAtMs: at };
        // Holds extended one by one (by hold id) are still running: look again after the last one.
        const holds = await Promise.all(record.items.map((_, i) => this.d.holds.get(this.holdKey(record, i))));
        const running = holds.filter((h) => h?.state === 'held').map((h) => h!.expiresAtMs);
        if (running.length > 0) return { nextAtMs: Math.max(...running) + grace };
        // Items confirmed by their hold ids (behind the order's back): all of them → the order is whole, so it
        // is recorded as committed and confirmed; only some → it is aborted and those are given back
        // (releaseAll), never left half taken.
        if (holds.every((h) => h?.state === 'confirmed')) {
          const c = await this.d.records.move(orderId, ['held'], 'committed', now);
          await this.follow(decided(c, orderId), true, []);
          return { ended: 'finished' };
        }
        const r = await this.d.records.move(orderId, ['held'], 'aborted', now, { set: { abort: 'expired' } });
        await this.follow(decided(r, orderId), true, []);
        return { ended: r.kind === 'moved' ? 'expired' : 'tidied' };
      }
      case 'committed':
        await this.finishCommit(record, []);
        return { ended: 'finished' };
      case 'aborted':
        await this.releaseAll(record, []);
        return { ended: 'tidied' };
      default:
        return { ended: 'tidied' };
    }
  }

  private async place(kind: OrderKind, input: OrderInput, signal?: AbortSignal): Promise<OrderResult> {
    const spec = await this.validate(kind, input);
    const now = this.now();
    // The due-list entry comes first: a record that exists is always one the sweeper will find.
    await this.d.records.schedule(spec.orderId, this.pendingDeadline({ createdMs: now, ttlMs: spec.ttlMs }));
    const opened = await this.d.records.open(spec, now);
    if (opened.kind === 'conflict') {
      const what =
        opened.field === 'kind' ? `order kind (it was a ${opened.recorded} order)` : `${opened.field} (recorded: ${opened.recorded})`;
      throw new DomainError(
        'failed_precondition',
        `request_id ${spec.orderId} was already used with a different ${what}; use a new request_id`,
      );
    }
    const record = opened.record;
    if (record.state === 'pending') return this.take(record, signal);
    const answer = await this.follow(record, true, []);
    // The due-list entry written above for a replay: a held order is looked at once it expires, an ended one never.
    const tidy =
      record.state === 'held' && record.expiresAtMs !== undefined
        ? this.d.records.schedule(spec.orderId, record.expiresAtMs + this.d.settings.graceMs)
        : this.d.records.unschedule(spec.orderId);
    // The sweeper drops a stale entry anyway: a failure here must not fail a correct answer.
    await tidy.catch((err) => this.d.onError?.('order schedule', err));
    return answer;
  }

  /** Holds every item (replays for those held before), then decides. `replayed` in the answer: the decision was
   * an earlier call's (a call that finishes an order a dead caller left undecided decides it itself). */
  private async take(record: OrderRecord, signal?: AbortSignal): Promise<OrderResult> {
    const takes = await Promise.all(
      record.items.map((item, i) =>
        this.d.holds.reserve({ ...this.holdKey(record, i), quantity: item.quantity, ttlMs: record.ttlMs }, signal).then(
          (t): HoldTake | { kind: 'error'; err: unknown } => t,
          (err: unknown) => ({ kind: 'error' as const, err }),
        ),
      ),
    );
    const seen: Seen = takes.map((t) => (t.kind === 'held' || t.kind === 'gone' ? t.hold : undefined));
    if (takes.some((t) => t.kind === 'gone' && t.end === 'confirmed')) {
      // An item is confirmed already, so a commit was made before and its record lost with a Redis node (or the
      // caller confirmed an item by its hold id). Follow that commit: confirm the rest, or give the confirmed
      // ones back if the rest cannot be (finishCommit), so the order still ends whole or empty.
      const r = await this.d.records.move(record.orderId, ['pending'], 'committed', this.now());
      return this.follow(decided(r, record.orderId), r.kind !== 'moved', seen);
    }
    const refusedAt = takes.findIndex((t) => t.kind === 'refused');
    if (refusedAt >= 0) {
      const t = takes[refusedAt] as Extract<HoldTake, { kind: 'refused' }>;
      const refused = { index: refusedAt, couponId: record.items[refusedAt]!.couponId, reason: t.reason };
      const r = await this.d.records.move(record.orderId, ['pending'], 'aborted', this.now(), { set: { abort: 'refused', refused } });
      return this.follow(decided(r, record.orderId), r.kind !== 'moved', seen);
    }
    const gone = takes.find((t) => t.kind === 'gone');
    if (gone) {
      // A retry after the holds ended (expired, or released by their hold id): the order cannot be completed.
      const abort: OrderAbort = gone.end === 'released' ? 'released' : 'expired';
      const r = await this.d.records.move(record.orderId, ['pending'], 'aborted', this.now(), { set: { abort } });
      return this.follow(decided(r, record.orderId), r.kind !== 'moved', seen);
    }
    const failed = takes.find((t) => t.kind === 'error');
    // Undecided: the record stays PENDING; a retry takes the same holds again, or the sweeper aborts it.
    if (failed) throw failed.err;
    if (record.kind === 'reserve') {
      const expiresAtMs = Math.min(...seen.map((h) => h!.expiresAtMs));
      const r = await this.d.records.move(record.orderId, ['pending'], 'held', this.now(), {
        notAfterMs: expiresAtMs,
        set: { expiresAtMs },
      });
      if (r.kind === 'late') return this.abortExpired(record, ['pending'], seen);
      if (r.kind === 'moved') await this.d.records.schedule(record.orderId, expiresAtMs + this.d.settings.graceMs);
      return this.follow(decided(r, record.orderId), r.kind !== 'moved', seen);
    }
    return this.commit(record, await this.lifetime(record, seen), seen);
  }

  /** Makes every hold live at least the commit margin (plus the sweeper's delay) from now: the earliest expiry
   * after that, or null when a hold has already ended. `seen` holds the expiries known (updated in place). */
  private async lifetime(record: OrderRecord, seen: Seen): Promise<number | null> {
    const s = this.d.settings;
    const needUntil = this.now() + s.commitMarginMs + s.finishAfterMs;
    const expiries = await Promise.all(
      record.items.map(async (_item, i) => {
        const known = seen[i]?.expiresAtMs ?? record.expiresAtMs ?? 0;
        if (known > needUntil) return known;
        const r = await this.d.holds.extend(this.holdKey(record, i), Math.max(record.ttlMs, s.commitMarginMs + s.finishAfterMs + 1000));
        if (r.hold) seen[i] = r.hold;
        // Confirmed already (by its hold id): it cannot expire any more, so it never stands in a commit's way;
        // treating it as ended would abort an order whose items are taken.
        if (r.end === 'confirmed') return needUntil + 1;
        return r.end === 'extended' && r.hold ? r.hold.expiresAtMs : null;
      }),
    );
    return expiries.includes(null) ? null : Math.min(...(expiries as number[]));
  }

  /** Records the commit (only while every hold outlives it by the margin), then confirms every hold. */
  private async commit(record: OrderRecord, expiresAtMs: number | null, seen: Seen): Promise<OrderResult> {
    const from: ('pending' | 'held')[] = record.state === 'held' ? ['held'] : ['pending'];
    if (expiresAtMs === null) return this.abortExpired(record, from, seen);
    const r = await this.d.records.move(record.orderId, from, 'committed', this.now(), {
      notAfterMs: expiresAtMs - this.d.settings.commitMarginMs,
      set: { expiresAtMs },
    });
    if (r.kind === 'late') return this.abortExpired(record, from, seen);
    if (r.kind === 'moved') await this.d.records.schedule(record.orderId, this.now() + this.d.settings.finishAfterMs);
    return this.follow(decided(r, record.orderId), r.kind !== 'moved', seen);
  }

  private async abortExpired(record: OrderRecord, from: ('pending' | 'held')[], seen: Seen): Promise<OrderResult> {
    const r = await this.d.records.move(record.orderId, from, 'aborted', this.now(), { set: { abort: 'expired' } });
    return this.follow(decided(r, record.orderId), r.kind !== 'moved', seen);
  }

  /** Carries out a recorded decision (idempotently) and answers with it. */
  private async follow(record: OrderRecord, replayed: boolean, seen: Seen): Promise<OrderResult> {
    if (record.state === 'pending')
      throw new DomainError('unavailable', `order ${record.orderId} is still being taken by another call; retry with the same request_id`, {
        retryAfterMs: 100,
      });
    if (record.state === 'aborted') await this.releaseAll(record, seen);
    if (record.state === 'committed') record = await this.finishCommit(record, seen);
    return this.answer(record, replayed, seen);
  }

  private async finishCommit(record: OrderRecord, seen: Seen): Promise<OrderRecord> {
    const ends = await this.each(record, async (hold, i) => {
      const r = await this.d.holds.confirm(hold);
      if (r.hold) seen[i] = r.hold;
      return r.end;
    });
    const lost = ends.map((end, i) => ({ end, i })).filter((x) => x.end !== 'confirmed');
    if (lost.length > 0) {
      this.stats.undoneCommits++;
      // A hold ended before its confirm: only if the commit margin was not enough (a stall longer than it
      // between the commit and the confirms). The order must still not stay half taken: the items confirmed are
      // given back (a compensation each, idempotent, so every finisher may do it) and the order ends EXPIRED.
      this.d.onError?.(
        'order confirm',
        new Error(`order ${record.orderId}: items ${lost.map((x) => `${x.i} ${x.end}`).join(', ')} after its commit; undoing the others`),
      );
      await this.each(record, (hold, i) =>
        ends[i] === 'confirmed'
          ? this.d.holds.compensate(hold, `order ${record.orderId}: another item expired before its confirm`)
          : Promise.resolve(null),
      );
      const r = await this.d.records.move(record.orderId, ['committed'], 'aborted', this.now(), { set: { abort: 'expired' } });
      return decided(r, record.orderId);
    }
    const r = await this.d.records.move(record.orderId, ['committed'], 'confirmed', this.now());
    // Not awaited: a stale due-list entry only makes the sweeper read a confirmed record and drop it.
    this.d.records.unschedule(record.orderId).catch((err) => this.d.onError?.('order unschedule', err));
    return decided(r, record.orderId);
  }

  /** Gives every item of an aborted order back. A failure is thrown, never swallowed: the order then stays on
   * its due-list (the sweeper reschedules a sweep that throws, and a caller's call fails before it could
   * unschedule), so the sweeper tries again. Swallowed, it let the sweeper drop an order whose item stayed
   * deducted (a Confirm by hold id not given back) or held until its hold expired. */
  private async releaseAll(record: OrderRecord, seen: Seen): Promise<void> {
    await this.each(record, async (hold, i) => {
      const why = `order ${record.orderId} ${record.abort ?? 'aborted'}`;
      const r = await this.d.holds.release(hold, why);
      if (r.hold) seen[i] = r.hold;
      // An item of an aborted order can only be confirmed by its hold id (Confirm with the item's hold_id,
      // behind the order's back). Leaving it would leave the order half taken while it says nothing was:
      // ABORTED means empty, so it is given back (idempotent, like every step after a decision).
      if (r.end === 'confirmed') await this.d.holds.compensate(hold, why);
    });
    await this.d.records.unschedule(record.orderId);
  }

  /** Runs `step` on every item's hold at once; throws the first failure after all have settled. */
  private async each<T>(record: OrderRecord, step: (hold: HoldKey, index: number) => Promise<T>): Promise<T[]> {
    const settled = await Promise.allSettled(record.items.map((_, i) => step(this.holdKey(record, i), i)));
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  }

  private pendingDeadline(record: Pick<OrderRecord, 'createdMs' | 'ttlMs'>): number {
    return record.createdMs + Math.min(record.ttlMs, this.d.settings.abandonAfterMs) + this.d.settings.graceMs;
  }

  private holdKey(record: OrderRecord, index: number): HoldKey {
    return { couponId: record.items[index]!.couponId, requestId: orderItemRequestId(record.orderId, index), userId: record.userId };
  }

  /** The answer: the record's outcome, and each item's hold (read for those this call has not seen). */
  private async answer(record: OrderRecord, replayed: boolean, seen: Seen): Promise<OrderResult> {
    const outcome: OrderOutcome =
      record.state === 'aborted'
        ? ABORT_OUTCOME[record.abort ?? 'released']
        : record.state === 'held' || record.state === 'compensated'
          ? record.state
          : 'confirmed';
    const holds = await Promise.all(
      record.items.map((_, i) =>
        seen[i] !== undefined
          ? seen[i]
          : this.d.holds.get(this.holdKey(record, i)).then(
              (h) => h ?? undefined,
              () => undefined,
            ),
      ),
    );
    return {
      orderId: record.orderId,
      outcome,
      replayed,
      ...(record.refused ? { refused: record.refused } : {}),
      ...(record.state === 'held' && record.expiresAtMs !== undefined ? { expiresAtMs: record.expiresAtMs } : {}),
      items: record.items.map((item, index) => ({
        index,
        couponId: item.couponId,
        quantity: item.quantity,
        requestId: orderItemRequestId(record.orderId, index),
        ...(holds[index] ? { hold: holds[index] } : {}),
      })),
    };
  }

  private async existing(orderId: string): Promise<OrderRecord> {
    const id = v.id('order_id', orderId, v.REQUEST_ID_MAX);
    const record = await this.d.records.read(id);
    if (!record) throw new DomainError('not_found', `no order with request_id ${id} (unknown, or older than the idempotency window)`);
    return record;
  }

  private async validate(kind: OrderKind, input: OrderInput) {
    const s = this.d.settings;
    const orderId = v.requestId(input.requestId);
    const userId = v.optionalId('user_id', input.userId, v.USER_ID_MAX) ?? '';
    if (input.items.length === 0) throw invalid('items', 'must list at least one item');
    if (input.items.length > s.maxItems) throw invalid('items', `must list at most ${s.maxItems} items, got ${input.items.length}`);
    const ttl = BigInt(input.ttlMs);
    const ttlMs = ttl === 0n ? s.ttl.defaultMs : v.units('ttl_ms', ttl, BigInt(s.ttl.minMs), BigInt(s.ttl.maxMs));
    const seen = new Map<string, number>();
    const items: OrderItemSpec[] = input.items.map((it, i) => {
      const couponId = v.id(`items[${i}].coupon_id`, it.couponId, v.COUPON_ID_MAX);
      const first = seen.get(couponId);
      if (first !== undefined)
        throw invalid(`items[${i}].coupon_id`, `repeats items[${first}]; list each coupon once with its total quantity`);
      seen.set(couponId, i);
      const quantity = it.quantity === 0n ? 1 : v.units(`items[${i}].quantity`, it.quantity, 1n, BigInt(s.maxQuantity));
      return { couponId, quantity };
    });
    // Checked before anything is taken, so a bad item never leaves the others held.
    await Promise.all(
      items.map(async (item, i) => {
        const coupon = await this.d.coupon(item.couponId);
        if (coupon.perUserLimit > 0 && userId === '')
          throw invalid('user_id', `is required: items[${i}] coupon ${item.couponId} has a per-user limit of ${coupon.perUserLimit}`);
      }),
    );
    return { orderId, kind, userId, items, ttlMs };
  }
}

/** The record after a move: moved, refused as late, or decided by someone else first. */
function decided(r: OrderMoveResult, orderId: string): OrderRecord {
  if (r.kind === 'missing')
    throw new DomainError('unavailable', `the record of order ${orderId} is missing (Redis lost it); retry with the same request_id`);
  return r.record;
}
