// One stock event on its way from a shard's outbox to the MySQL ledger: its identity and its JSON form on
// JetStream (its subject: nats/subjects.ts).

export type EventKind = 'D' | 'C';

export interface SettlementEvent {
  kind: EventKind;
  couponId: string;
  requestId: string;
  userId: string;
  quantity: number;
  /** Shard index that served the request (the request record, and the user's count, live there). */
  shard: number;
  /** When Redis applied it, ms since epoch (the deducting instance's clock). */
  occurredAt: number;
  /** Compensations: the caller's reason. Deductions: CONFIRMED_HOLD when the deduction confirmed a hold, else
   * empty. */
  reason: string;
}

/** The reason of a deduction that confirmed a hold (hold-confirm-7.lua), kept on its ledger row: a recovery that
 * puts the request's record back from the ledger or the events in flight marks it a hold's (record flag h), so
 * the Reserve's request id still answers as a confirmed hold (a retried Reserve or order replays, a Deduct with
 * that id is refused) instead of as a plain Deduct's. */
export const CONFIRMED_HOLD = 'hold';

/** Defined with every other id in domain/ids.ts; re-exported for the event's readers. */
export { eventId } from '../domain/ids.js';

/** What the event does to the units Redis handed out: a deduction takes, a compensation gives back. */
export function signedQuantity(e: Pick<SettlementEvent, 'kind' | 'quantity'>): number {
  return e.kind === 'D' ? e.quantity : -e.quantity;
}

export const LEDGER_KIND = { D: 'DEDUCT', C: 'COMPENSATE' } as const;

/** The field names of a one-event outbox entry, as hold-confirm-7.lua XADDs it (a test keeps the script and this
 * list in step); shard-ops.lua's packed entries use the same names for the shared fields. */
export const OUTBOX_FIELDS = {
  kind: 'k',
  couponId: 'c',
  requestId: 'r',
  userId: 'u',
  quantity: 'q',
  shard: 's',
  occurredAt: 't',
  reason: 'm',
} as const satisfies Record<keyof SettlementEvent, string>;

/** One event of an outbox entry: parsed, or null when it does not parse (relayed as-is, a poison message in
 * settlement), with its own fields. */
export interface OutboxEvent {
  event: SettlementEvent | null;
  raw: string[];
}

/** The fields of an entry all of its packed events share. */
const SHARED = [OUTBOX_FIELDS.couponId, OUTBOX_FIELDS.shard, OUTBOX_FIELDS.occurredAt] as const;

/**
 * An outbox stream entry's field list, in either of two forms:
 * - one event, a field per value (`k`, `c`, `r`, …: OUTBOX_FIELDS), as hold-confirm-7.lua writes it and as
 *   every entry was written before group commit;
 * - packed, as lua/includes/shard-ops.lua writes one Lua call's events: `c`, `s`, `t` shared, then one field
 *   per event, named by its kind (`D` or `C`), valued "requestId|userId|quantity" and for a C "|reason" after
 *   it (ids never contain '|'; the reason, last, may).
 */
export function fromOutboxEntry(fields: string[]): OutboxEvent[] {
  if (fields[0] === OUTBOX_FIELDS.kind) return [{ event: fromFieldMap(fieldMap(fields)), raw: fields }];
  const shared: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if ((SHARED as readonly string[]).includes(fields[i]!)) shared.push(fields[i]!, fields[i + 1]!);
  }
  const out: OutboxEvent[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const kind = fields[i]!;
    if (kind !== 'D' && kind !== 'C') continue;
    const raw = [...shared, kind, fields[i + 1]!];
    out.push({ event: fromPacked(kind, fields[i + 1]!, fieldMap(shared)), raw });
  }
  // Neither form: one unreadable event, passed on as it is.
  if (out.length === 0) return [{ event: null, raw: fields }];
  return out;
}

function fieldMap(fields: string[]): Record<string, string> {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  return f;
}

function fromPacked(kind: EventKind, value: string, shared: Record<string, string>): SettlementEvent | null {
  const a = value.indexOf('|');
  const b = a < 0 ? -1 : value.indexOf('|', a + 1);
  if (b < 0) return null;
  const c = value.indexOf('|', b + 1);
  const F = OUTBOX_FIELDS;
  return validate({
    kind,
    couponId: shared[F.couponId] ?? '',
    requestId: value.slice(0, a),
    userId: value.slice(a + 1, b),
    quantity: Number(c < 0 ? value.slice(b + 1) : value.slice(b + 1, c)),
    shard: Number(shared[F.shard]),
    occurredAt: Number(shared[F.occurredAt]),
    reason: c < 0 ? '' : value.slice(c + 1),
  });
}

/** The first event of an outbox entry (a single-event entry: the hold scripts, and entries written before
 * group commit shared one entry per call). */
export function fromOutboxFields(fields: string[]): SettlementEvent | null {
  return fromOutboxEntry(fields)[0]?.event ?? null;
}

function fromFieldMap(f: Record<string, string>): SettlementEvent | null {
  const F = OUTBOX_FIELDS;
  return validate({
    kind: f[F.kind] as EventKind,
    couponId: f[F.couponId] ?? '',
    requestId: f[F.requestId] ?? '',
    userId: f[F.userId] ?? '',
    quantity: Number(f[F.quantity]),
    shard: Number(f[F.shard]),
    occurredAt: Number(f[F.occurredAt]),
    reason: f[F.reason] ?? '',
  });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeEvent(e: SettlementEvent): Uint8Array {
  return encoder.encode(
    JSON.stringify({ k: e.kind, c: e.couponId, r: e.requestId, u: e.userId, q: e.quantity, s: e.shard, t: e.occurredAt, m: e.reason }),
  );
}

/** null when the payload is not a well-formed event (a poison message). */
export function decodeEvent(data: Uint8Array): SettlementEvent | null {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(decoder.decode(data)) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (typeof o !== 'object' || o === null) return null;
  return validate({
    kind: o.k as EventKind,
    couponId: typeof o.c === 'string' ? o.c : '',
    requestId: typeof o.r === 'string' ? o.r : '',
    userId: typeof o.u === 'string' ? o.u : '',
    quantity: Number(o.q),
    shard: Number(o.s),
    occurredAt: Number(o.t),
    reason: typeof o.m === 'string' ? o.m : '',
  });
}

function validate(e: SettlementEvent): SettlementEvent | null {
  if (e.kind !== 'D' && e.kind !== 'C') return null;
  if (!e.couponId || !e.requestId) return null;
  if (!Number.isSafeInteger(e.quantity) || e.quantity < 1) return null;
  if (!Number.isSafeInteger(e.shard) || e.shard < 0) return null;
  if (!Number.isFinite(e.occurredAt)) return null;
  return e;
}
