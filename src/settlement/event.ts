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
  /** Compensations only. */
  reason: string;
}

/** Defined with every other id in domain/ids.ts; re-exported for the event's readers. */
export { eventId } from '../domain/ids.js';

/** What the event does to the units Redis handed out: a deduction takes, a compensation gives back. */
export function signedQuantity(e: Pick<SettlementEvent, 'kind' | 'quantity'>): number {
  return e.kind === 'D' ? e.quantity : -e.quantity;
}

export const LEDGER_KIND = { D: 'DEDUCT', C: 'COMPENSATE' } as const;

/** The outbox entry's field names, as lua/deduct-7.lua and lua/compensate-6.lua XADD them (a test keeps the
 * scripts and this list in step). */
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

/** The outbox stream entry's field list, as the Lua scripts XADD it. */
export function fromOutboxFields(fields: string[]): SettlementEvent | null {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
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
