// Holds: units taken out of available stock for a while (Reserve), then confirmed into a deduction, released,
// or expired by Redis's clock. This file is the port other use cases (orders) program against; the service
// that implements it is src/domain/hold-service.ts.
import { invalid } from './errors.js';

export type HoldState = 'held' | 'confirmed' | 'released' | 'expired';

export interface Hold {
  /** Opaque to callers: `<couponId>/<shard>/<requestId>` (neither id may contain '/'). */
  holdId: string;
  couponId: string;
  requestId: string;
  userId: string;
  /** Units reserved. */
  quantity: number;
  /** Units confirmed (state confirmed; the rest went back). */
  confirmed: number;
  shard: number;
  /** ms since epoch on the Redis server's clock. */
  expiresAtMs: number;
  state: HoldState;
}

export type ReserveOutcome = 'held' | 'sold_out' | 'insufficient' | 'user_limit_exceeded' | 'not_started' | 'ended' | 'sale_paused';

export interface ReserveInput {
  couponId: string;
  requestId: string;
  userId: string;
  /** 0 means 1. */
  quantity: bigint;
  /** 0 = the configured default. */
  ttlMs: number;
}

export interface ReserveResult {
  outcome: ReserveOutcome;
  replayed: boolean;
  /** Set on held, and on a replay (with the hold's state now). */
  hold?: Hold;
  /** Units left available in the serving shard right after the call. */
  remaining: number;
  shard: number;
}

export type ConfirmOutcome = 'confirmed' | 'expired' | 'released' | 'not_found';
export interface ConfirmResult {
  outcome: ConfirmOutcome;
  replayed: boolean;
  hold?: Hold;
  /** Units given back by a partial confirm. */
  released: number;
}

export type ReleaseOutcome = 'released' | 'already_released' | 'expired' | 'confirmed' | 'not_found';
export interface ReleaseResult {
  outcome: ReleaseOutcome;
  hold?: Hold;
  /** Units given back by this call. */
  released: number;
}

export type ExtendOutcome = 'extended' | 'expired' | 'released' | 'confirmed' | 'not_found';
export interface ExtendResult {
  outcome: ExtendOutcome;
  hold?: Hold;
}

/** What orders (and transports) call. Every method is idempotent; validation errors are DomainErrors naming
 * the field (hold_id, quantity, ttl_ms, ...). Exactly one of confirm / release / expiry ever wins a hold. */
export interface Holds {
  reserve(input: ReserveInput, signal?: AbortSignal): Promise<ReserveResult>;
  /** quantity: units to keep (1..held); 0n or undefined = all. The rest is released in the same step. */
  confirm(holdId: string, quantity?: bigint, signal?: AbortSignal): Promise<ConfirmResult>;
  release(holdId: string, reason?: string, signal?: AbortSignal): Promise<ReleaseResult>;
  /** ttlMs from now on the Redis server's clock; 0 = the configured default. */
  extend(holdId: string, ttlMs: number, signal?: AbortSignal): Promise<ExtendResult>;
  /** The hold as recorded (null: unknown or past the idempotency window). */
  get(holdId: string): Promise<Hold | null>;
}

export function holdIdOf(couponId: string, shard: number, requestId: string): string {
  return `${couponId}/${shard}/${requestId}`;
}

/** Splits a hold id; throws invalid_argument naming `field` when it is not one. */
export function parseHoldId(holdId: string, field = 'hold_id'): { couponId: string; shard: number; requestId: string } {
  const m = /^([^/]+)\/(\d{1,4})\/([^/]+)$/.exec(holdId);
  if (!m) throw invalid(field, `is not a hold id (expected <coupon_id>/<shard>/<request_id>), got ${JSON.stringify(holdId.slice(0, 300))}`);
  return { couponId: m[1]!, shard: Number(m[2]), requestId: m[3]! };
}
