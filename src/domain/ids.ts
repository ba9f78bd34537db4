// Every identity shardstock derives from coupon and request ids, in one place. These strings are stored (in
// Redis credit sets and move hashes, JetStream's duplicate window, MySQL's anomaly table), so their formats
// must never change.
import { createHash } from 'node:crypto';

/** `<kind>:<couponId>:<requestId>` (kind D or C): the JetStream message id (duplicate window) and the anomaly
 * key. One deduction and at most one compensation exist per request, exactly like the ledger's unique key. */
export function eventId(e: { kind: string; couponId: string; requestId: string }): string {
  return `${e.kind}:${e.couponId}:${e.requestId}`;
}

/** `<kind>:<requestId>`: an event within one coupon's ledger (the settle planner's settled set). */
export function ledgerKey(kind: string, requestId: string): string {
  return `${kind}:${requestId}`;
}

/** The message id of an outbox entry the settler cannot read (passed on to be recorded as an anomaly). */
export function unreadableEventId(shardTag: string, streamId: string): string {
  return `X:${shardTag}:${streamId}`;
}

/** One round of one Deduct call's fallback: `attempt` is new on every call, so a retry never reuses a move id
 * (it would find its credit applied and skip it, destroying the units it had just taken). */
export function moveRound(requestId: string, attempt: string, round: number): string {
  return `${requestId}/${attempt}.${round}`;
}

/** A fallback move from `source` to `target` shard within one round. */
export function moveIdFor(round: string, source: number, target: number): string {
  return `${round}/${source}>${target}`;
}

/** The credit a move lands with on its target shard (applied at most once, by the mover or the sweeper). */
export function moveCreditId(moveId: string): string {
  return `M:${moveId}`;
}

/** A restock's share on each shard (applied at most once, by the restock, its retry or a recovery). */
export function restockCreditId(requestId: string): string {
  return `R:${requestId}`;
}

/** The request id of an order item's hold: derived, so a retry of the order reaches the same holds. Long
 * order ids keep a prefix and a digest so the result stays within the request id limit (128). */
export function orderItemRequestId(orderId: string, index: number): string {
  const plain = `${orderId}:${index}`;
  if (plain.length <= 128) return plain;
  const digest = createHash('sha256').update(orderId).digest('base64url').slice(0, 22);
  return `${orderId.slice(0, 96)}:${digest}:${index}`;
}
