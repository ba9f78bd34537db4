// The narrow interfaces the domain needs from infrastructure. Redis, MySQL and NATS implementations live in
// src/redis, src/db and src/settlement; the use cases never see a client library type.

import type { Coupon, SaleSettings, ShardRef } from './model.js';
import type { Hold } from './holds.js';

// Adapters implement these over the domain's own types; re-exported so they need one import.
export type { Coupon, SaleSettings, ShardRef } from './model.js';

/** One deduction as deduct-7.lua takes it (validated; the coupon's per-user limit attached). */
export interface DeductScriptInput {
  requestId: string;
  userId: string;
  quantity: number;
  perUserLimit: number;
}

export interface Credit {
  id: string;
  quantity: number;
}

export type DeductScriptResult =
  /** expiresAtMs: set by a Reserve (hold-reserve-7.lua), on the Redis server's clock. */
  | { kind: 'deducted'; remaining: number; expiresAtMs?: number }
  | { kind: 'replay'; remaining: number; compensated: boolean }
  /** epoch: the shard's recovery epoch, under which fallback credits for it are planned. */
  | { kind: 'short'; available: number; epoch: string }
  | { kind: 'user_limit'; held: number }
  /** field 'kind': the request id was used by the other of Deduct and Reserve (recorded: which). */
  | { kind: 'conflict'; field: 'user_id' | 'quantity' | 'kind'; recorded: string }
  | { kind: 'missing' }
  | { kind: 'paused'; waitMs: number }
  /** A recovery ran since the credits were planned: none applied; drop them (the sweeper lands live moves). */
  | { kind: 'stale_credits' };

export type CompensateScriptResult =
  | { kind: 'compensated'; remaining: number; quantity: number }
  | { kind: 'already'; remaining: number }
  | { kind: 'not_deducted' }
  | { kind: 'missing' }
  | { kind: 'paused'; waitMs: number };

export interface ShardLevel {
  index: number;
  /** null when the shard key is missing */
  available: number | null;
  inTransit: number;
  net: number;
  /** Units in open holds (Reserve): neither available nor deducted. */
  held?: number;
  /** Set while writes to the shard are refused (its master just changed): when to try again. */
  fencedRetryAfterMs?: number;
}

/** 'stale': an epoch was given and a recovery has run on the shard since; nothing changed. */
export type CreditResult = 'applied' | 'already' | 'missing' | 'paused' | 'stale';

export interface PendingMove {
  moveId: string;
  target: number;
  quantity: number;
  startedMs: number;
}

/** Stock in Redis Cluster: every method is one atomic step in one shard's slot (probe: one per shard). */
export interface StockStore {
  /** net: units the shard counts as deducted (a reloaded shard's share of the coupon's net deductions). */
  initShard(shard: ShardRef, available: number, net?: number): Promise<boolean>;
  /** creditEpoch: the epoch of the 'short' answer the credits were planned under ('' without credits). */
  /** signal: the call's deadline; a call still waiting for its batch when it passes is dropped from it. */
  deduct(
    shard: ShardRef,
    input: DeductScriptInput,
    credits: Credit[],
    creditEpoch?: string,
    signal?: AbortSignal,
  ): Promise<DeductScriptResult>;
  /** limitedUserId: the deduction's user when the coupon has a per-user limit (its count is given back). */
  compensate(
    shard: ShardRef,
    requestId: string,
    reason: string,
    limitedUserId: string | undefined,
    signal?: AbortSignal,
  ): Promise<CompensateScriptResult>;
  /** SET NX GET of "user|quantity" on the request's own shard, held briefly; returns what was there before
   * (null: claimed now; 'missing': that shard is gone with its claims: recover, then claim again). */
  claimRequest(shard: ShardRef, requestId: string, value: string): Promise<string | null | 'missing'>;
  /** Once the request's deduction is made: keeps its claim for the idempotency window. */
  keepClaim(shard: ShardRef, requestId: string, value: string): Promise<void>;
  /** 'missing': the shard holding the claim is gone (its claims with it): recover, then read again. */
  readClaim(shard: ShardRef, requestId: string): Promise<string | null | 'missing'>;
  /** The recorded deduction of a request, without a write (sold-out fast path). Like a replay, a found record
   * is answered only once it is as durable as the ack level asks. 'missing': the shard is gone with its
   * records: only a recovery can tell whether the request deducted. */
  readRequest(
    shard: ShardRef,
    requestId: string,
  ): Promise<
    | {
        userId: string;
        quantity: number;
        remaining: number;
        compensated: boolean;
        /** A Reserve's (a confirmed hold, or one not confirmed: `hold`): its request id is not a Deduct's. */
        reserve: boolean;
      }
    | null
    | 'missing'
  >;
  probe(shards: ShardRef[]): Promise<ShardLevel[]>;
  /** 'paused': the coupon is being recovered; take from elsewhere or wait. */
  moveOut(source: ShardRef, moveId: string, target: number, want: number): Promise<number | 'missing' | 'paused'>;
  /** false: unknown move id, the source shard's hash is gone (then nothing is changed), or paused. */
  ackMove(source: ShardRef, moveId: string): Promise<boolean>;
  /**
   * 'paused': a recovery holds the coupon; it settles what this credit was for, so retry later.
   * epoch: when given, the credit lands only if the shard's recovery epoch is still this one ('stale' if not).
   */
  credit(shard: ShardRef, creditId: string, quantity: number, epoch?: string): Promise<CreditResult>;
  /** Each shard's recovery epoch ('' when none was ever set), or null when its hash is missing. */
  epochs(shards: ShardRef[]): Promise<(string | null)[]>;
  pendingMoves(shard: ShardRef): Promise<PendingMove[]>;
}

export interface RestockResult {
  coupon: Coupon;
  /** The ledger already had this restock. */
  replayed: boolean;
  /** Whether the shards still need their share (false once recorded as applied). */
  needsRedis: boolean;
  /** The restock's quantity as recorded (a replay may ask with another). */
  quantity: number;
}

/** A new restock that would lift the coupon's total stock above the most one coupon can hold. */
export interface RestockOverCap {
  overCap: true;
  /** The total stock it would have reached. */
  wouldBe: number;
}

export type NewCoupon = Pick<Coupon, 'id' | 'initialStock' | 'shardCount' | 'perUserLimit' | 'shardTags'> & {
  /** The window to set when the row is inserted (ignored when it exists). */
  startsAt?: number | null;
  endsAt?: number | null;
};

/** The record in MySQL. */
export interface CouponRepository {
  /** Inserts the coupon; when one with this id exists, returns it unchanged with created = false. */
  create(coupon: NewCoupon): Promise<{ coupon: Coupon; created: boolean }>;
  find(id: string): Promise<Coupon | null>;
  /** One page of every coupon, by id after `afterId` (a slow walk over all of them: CouponWalk). */
  page(afterId: string, limit: number): Promise<Coupon[]>;
  /** The sale settings of the coupons that exist among `ids` (one query: the catalog's background refresh). */
  saleSettings(ids: readonly string[]): Promise<Map<string, SaleSettings>>;
  markPreheated(id: string): Promise<void>;
  /** Refuses (nothing written) a new restock that would lift the total stock above `cap`; a replay is answered
   * as recorded whatever the total. */
  restock(id: string, requestId: string, quantity: number, cap: number): Promise<RestockResult | RestockOverCap | null>;
  markRestockApplied(id: string, requestId: string): Promise<void>;
  /** Restocks committed in MySQL whose shards were not credited yet (a crash in between). */
  unappliedRestocks(olderThanMs: number): Promise<{ couponId: string; requestId: string; quantity: number }[]>;
}

/** Sale settings in MySQL: each change with its audit ledger row (quantity 0) in one transaction. */
export interface SaleRepository {
  /** null: no such coupon. changed = false when nothing differed (then no ledger row is written). */
  changeSale(
    couponId: string,
    change: Partial<Pick<SaleSettings, 'startsAt' | 'endsAt' | 'paused'>>,
    audit: { kind: 'SALE_WINDOW' | 'SALE_PAUSE' | 'SALE_RESUME'; reason: string },
  ): Promise<{ sale: SaleSettings; changed: boolean } | null>;
}

/** Sale changes between instances over NATS core (each instance also re-reads them in the background). */
export interface SaleSignals {
  saleChanged(couponId: string, sale: SaleSettings): void;
  onSaleChanged(listener: (couponId: string, sale: SaleSettings) => void): () => void;
}

/** Cross-instance signals over NATS core (fire-and-forget; every instance also re-checks on its own). */
export interface StockSignals {
  /** Units came back (Restock, Compensate): every instance drops its sold-out flag for the coupon. */
  stockReturned(couponId: string): void;
  onStockReturned(listener: (couponId: string) => void): () => void;
}

/** Told after a use case changed a coupon's level. Called on the Deduct hot path: must be cheap (no I/O
 * inline) and never throw. `returned`: units came back (Compensate, Restock) rather than were taken. */
export interface StockChanges {
  changed(couponId: string, returned: boolean): void;
}

/** Where a new coupon's shards live: one hash tag per shard, spread over the cluster as it is now. */
export interface ShardPlacement {
  shardTags(couponId: string, shardCount: number): string[];
}

/** Net units of one coupon's events not settled in MySQL yet (outbox + JetStream). */
export interface InFlightCounter {
  inFlightNet(couponId: string): Promise<number>;
}

export interface RecoveryReport {
  couponId: string;
  /** Shards found missing and rebuilt. */
  rebuiltShards: number[];
  /** Units put into rebuilt shards. */
  loadedUnits: number;
  /** Units taken away from shards that held more than the bound allows (negative or zero). */
  loweredUnits: number;
  /** Units added to live shards that held less than the bound (repair with restore only). */
  restoredUnits: number;
  /** Request records, user counts and claims written back for rebuilt shards. */
  restoredRecords: number;
  restoredUsers: number;
  /** Restocks committed in MySQL whose shares the recovery credited or accounted for. */
  finishedRestocks: number;
  /** MySQL remaining minus net units in flight, as of the pause: what the shards may hold at most. */
  bound: number;
  /** What the shards held (available + in transit) before and after. */
  heldBefore: number;
  heldAfter: number;
  pausedMs: number;
}

export type RecoveryOutcome = { kind: 'done'; report: RecoveryReport } | { kind: 'busy'; retryAfterMs: number };

/** Brings a coupon's shards back within the bound (MySQL remaining minus what is in flight) from one
 * consistent moment: one holder at a time per coupon, the coupon paused on every instance meanwhile.
 * restore: also add units a live shard lost (a repair); rebuilding missing shards happens either way. */
export interface CouponRecovery {
  recover(couponId: string, reason: string, options?: { restore?: boolean }): Promise<RecoveryOutcome>;
}

// ---- Orders of several items (docs/orders.md) ----

/** Why a hold (and so an order item) was refused: the refusals Deduct answers. */
export type HoldRefusal = 'sold_out' | 'insufficient' | 'user_limit_exceeded' | 'not_started' | 'ended' | 'sale_paused';

/** How a hold ended (or 'not_held': no hold under that request id). */
export type HoldEnd = 'confirmed' | 'released' | 'expired' | 'not_held';

/** One item's hold, named by its coupon, its (derived) request id and the order's user (which, on a limited
 * coupon, decides the shard it lives on). */
export interface HoldKey {
  couponId: string;
  requestId: string;
  userId: string;
}

export type HoldTake =
  | { kind: 'held'; hold: Hold }
  | { kind: 'refused'; reason: HoldRefusal }
  /** A replay of a hold that is no longer held. */
  | { kind: 'gone'; end: Exclude<HoldEnd, 'not_held'>; hold: Hold };

/** What an order needs from holds (src/domain/holds.ts): each call is one atomic, idempotent step on one coupon. */
export interface OrderHolds {
  reserve(item: HoldKey & { quantity: number; ttlMs: number }, signal?: AbortSignal): Promise<HoldTake>;
  /** 'confirmed' also when it was confirmed before. */
  confirm(hold: HoldKey): Promise<{ end: HoldEnd; hold?: Hold | undefined }>;
  /** 'released' also when it was released before. */
  release(hold: HoldKey, reason: string): Promise<{ end: HoldEnd; hold?: Hold | undefined }>;
  extend(hold: HoldKey, ttlMs: number): Promise<{ end: HoldEnd | 'extended'; hold?: Hold | undefined }>;
  get(hold: HoldKey): Promise<Hold | null>;
  /** Gives a confirmed hold's units back (a Compensate of its deduction). */
  compensate(hold: HoldKey, reason: string): Promise<'compensated' | 'already_compensated' | 'not_deducted'>;
}

export type OrderKind = 'reserve' | 'deduct';
/** pending: holds being taken; held: all held, kept as holds (ReserveOrder); committed: confirms follow;
 * confirmed, aborted, compensated: final (aborted's holds are released, compensated's deductions given back). */
export type OrderState = 'pending' | 'held' | 'committed' | 'confirmed' | 'aborted' | 'compensated';
/** Why an order was aborted. abandoned: left PENDING past its holds' lifetime (its instance died). */
export type OrderAbort = 'refused' | 'expired' | 'released' | 'abandoned';

export interface OrderItemSpec {
  couponId: string;
  quantity: number;
}

export interface OrderRefused {
  index: number;
  couponId: string;
  reason: HoldRefusal;
}

export interface OrderRecord {
  orderId: string;
  kind: OrderKind;
  userId: string;
  items: OrderItemSpec[];
  ttlMs: number;
  state: OrderState;
  createdMs: number;
  decidedMs?: number;
  /** The earliest of the items' hold expiries, once all were held. */
  expiresAtMs?: number;
  abort?: OrderAbort;
  refused?: OrderRefused;
}

export type OrderOpenResult =
  | { kind: 'created'; record: OrderRecord }
  | { kind: 'found'; record: OrderRecord }
  | { kind: 'conflict'; field: 'user_id' | 'items' | 'kind'; recorded: string };

export type OrderMoveResult =
  /** Moved; `record` is the state after the move. */
  | { kind: 'moved'; record: OrderRecord }
  /** The state allowed the move but the deadline had passed: nothing changed. */
  | { kind: 'late'; record: OrderRecord }
  /** The state was not one of `from`: someone decided first. */
  | { kind: 'other'; record: OrderRecord }
  | { kind: 'missing' };

/** Order records: each in its own slot; a state change is one compare-and-set. */
export interface OrderRecords {
  /** Creates the record PENDING, or returns the one that exists (a conflict when user, items or kind differ). */
  open(spec: Pick<OrderRecord, 'orderId' | 'kind' | 'userId' | 'items' | 'ttlMs'>, nowMs: number): Promise<OrderOpenResult>;
  /** Moves the state to `to` if it is one of `from` (and nowMs < notAfterMs when given), setting `set`. */
  move(
    orderId: string,
    from: OrderState[],
    to: OrderState,
    nowMs: number,
    opts?: { notAfterMs?: number; set?: Partial<Pick<OrderRecord, 'expiresAtMs' | 'abort' | 'refused'>> },
  ): Promise<OrderMoveResult>;
  read(orderId: string): Promise<OrderRecord | null>;
  /** The sweeper's due-lists: when to look at an order next (upsert). */
  schedule(orderId: string, atMs: number): Promise<void>;
  unschedule(orderId: string): Promise<void>;
  /** Order ids whose time has come, a few from each due-list. */
  due(nowMs: number, limit: number): Promise<string[]>;
}

// ---- Holds (src/domain/hold-service.ts over src/redis/hold-store.ts) ----

export type HoldConfirmReply =
  | { kind: 'confirmed' | 'replay'; kept: number; released: number }
  | { kind: 'not_found' }
  | { kind: 'released' }
  | { kind: 'missing' }
  | { kind: 'expired'; released: number }
  | { kind: 'conflict'; recorded: number }
  | { kind: 'paused'; waitMs: number }
  | { kind: 'too_many'; held: number };

export type HoldReleaseReply =
  | { kind: 'released' | 'expired'; released: number }
  | { kind: 'already_released' }
  | { kind: 'not_found' }
  | { kind: 'confirmed' }
  | { kind: 'missing' }
  | { kind: 'paused'; waitMs: number };

export type HoldExtendReply =
  | { kind: 'extended'; expiresAtMs: number }
  | { kind: 'not_found' }
  | { kind: 'confirmed' }
  | { kind: 'expired' }
  | { kind: 'released' }
  | { kind: 'missing' }
  | { kind: 'paused'; waitMs: number };

/** A hold as its request record keeps it (state: h held, c confirmed, r released, x expired). */
export interface HoldRecord {
  userId: string;
  /** Units reserved. */
  quantity: number;
  /** Units confirmed (state c). */
  confirmed: number;
  state: 'h' | 'c' | 'r' | 'x';
  expiresAtMs: number;
  remaining: number;
}

/** What a hold's record says when read: the hold; null: nothing recorded under the request id; 'deduction': a
 * Deduct's record is (no hold); 'missing': the shard is gone with its holds and records. */
export type HoldRead = HoldRecord | null | 'missing' | 'deduction';

/** A hold script's reply with the hold's record as read right after the script, for the replies about a record
 * that exists (not not_found, missing, paused): read while the replica ack is awaited, not after it. */
export type WithRecord<R> = R & { record?: HoldRead };

/** Holds in Redis: each call one atomic script on the hold's shard; expiry judged by the Redis server's clock. */
export interface HoldStore {
  /** Like StockStore.deduct, for a hold of input.ttlMs: 'deducted' carries expiresAtMs; 'replay' = the hold exists.
   * The shard goes into the index sweepers visit before the script and again after a new hold. */
  reserve(
    shard: ShardRef,
    input: DeductScriptInput & { ttlMs: number },
    credits: Credit[],
    creditEpoch?: string,
    signal?: AbortSignal,
  ): Promise<DeductScriptResult>;
  read(shard: ShardRef, requestId: string): Promise<HoldRead>;
  /** keep: units to confirm, 0 = all. */
  confirm(shard: ShardRef, requestId: string, keep: number): Promise<WithRecord<HoldConfirmReply>>;
  release(shard: ShardRef, requestId: string): Promise<WithRecord<HoldReleaseReply>>;
  extend(shard: ShardRef, requestId: string, ttlMs: number): Promise<WithRecord<HoldExtendReply>>;
}

/** What a hold sweeper needs (src/domain/hold-sweeper.ts): the shards that may have open holds, the due ones
 * on a shard (by the Redis server's clock), and the atomic expiry of one (units given back; 0: nothing to do). */
export interface HoldExpiry {
  indexed(): Promise<ShardRef[]>;
  due(shard: ShardRef, limit: number): Promise<{ open: number; due: string[] }>;
  expire(shard: ShardRef, member: string): Promise<number | 'missing' | 'paused'>;
  unindexIfEmpty(shard: ShardRef): Promise<void>;
  /** Puts back in the index every given shard that has open holds; returns how many were missing from it. */
  reindex(shards: ShardRef[]): Promise<number>;
}
