// MySQL is the record. A coupon row carries the settled remaining with an optimistic-lock version; the
// ledger has one row per settled deduction, compensation and restock, unique on (coupon, request, kind) so
// a duplicate event can never be counted twice; anomalies are events the record refused.
import { defineEntity, p } from '@mikro-orm/core';

export const CouponRow = defineEntity({
  name: 'CouponRow',
  tableName: 'coupon',
  properties: {
    id: p.string().primary().length(64),
    /** Stock the coupon was created with: part of its definition (CreateCoupon idempotency). */
    initialStock: p.bigint('number'),
    /** Initial stock plus every restock. */
    totalStock: p.bigint('number'),
    shardCount: p.integer(),
    perUserLimit: p.integer(),
    /** Hash tag of each shard, JSON array, fixed at creation. */
    shardTags: p.json<string[]>(),
    /** Set once every shard was preheated: a replayed CreateCoupon must not reload a shard that later vanished. */
    preheated: p.boolean().default(false),
    settledRemaining: p.bigint('number'),
    createdAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
    version: p.integer().version(),
    /** Recovery lease (src/recovery): who holds it and until when (ms since epoch); never bumps version. */
    recoveryOwner: p.string().length(128).nullable(),
    recoveryUntil: p.bigint('number').nullable(),
    /** Recoveries completed on this coupon. */
    recoveryEpoch: p.integer().default(0),
    /** Sale window (ms since epoch, null = unbounded) and kill switch; sale_revision orders their changes. */
    saleStartsAt: p.bigint('number').nullable(),
    saleEndsAt: p.bigint('number').nullable(),
    salePaused: p.boolean().default(false),
    saleRevision: p.integer().default(0),
  },
  indexes: [{ properties: ['createdAt'], name: 'ix_coupon_created_at' }],
});

/** REPAIR: a recovery or repair changed Redis (quantity = units added, negative when taken; reason says why).
 * SALE_*: an operator changed the sale window or paused/resumed it (quantity 0; reason says what and why). */
export const LedgerKinds = ['DEDUCT', 'COMPENSATE', 'RESTOCK', 'REPAIR', 'SALE_WINDOW', 'SALE_PAUSE', 'SALE_RESUME'] as const;
export type LedgerKind = (typeof LedgerKinds)[number];

export const LedgerRow = defineEntity({
  name: 'LedgerRow',
  tableName: 'stock_ledger',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    couponId: p.string().length(64),
    requestId: p.string().length(128),
    kind: p.enum(() => [...LedgerKinds]),
    quantity: p.bigint('number'),
    userId: p.string().length(128).nullable(),
    shard: p.integer().nullable(),
    reason: p.string().length(256).nullable(),
    /** When the event happened in Redis (ms since epoch); settlement lag = settledAt - occurredAt. */
    occurredAt: p.bigint('number'),
    settledAt: p.datetime().length(3),
    /** Restocks only: the Redis shards were credited (MySQL is written first). */
    redisApplied: p.boolean().default(true),
  },
  uniques: [{ properties: ['couponId', 'requestId', 'kind'], name: 'uq_ledger_request' }],
  indexes: [{ properties: ['couponId', 'kind'], name: 'ix_ledger_coupon_kind' }],
});

/** Anomaly reasons, as stored in settlement_anomaly.reason. */
export const ANOMALY = {
  /** MySQL's settled remaining could not cover the deduction: the unit was sold beyond the record (oversold).
   * It stays sold in Redis (never put back on sale); the coupon is then repaired down to the bound. */
  refused: 'insufficient_settled_remaining',
  /** A compensation of a deduction that was refused: nothing left to settle. */
  ofRefused: 'compensates_refused_deduction',
  unparsable: 'unparsable_message',
  unknownCoupon: 'unknown_coupon',
} as const;

export const AnomalyRow = defineEntity({
  name: 'AnomalyRow',
  tableName: 'settlement_anomaly',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    /** JetStream message id of the refused event. */
    eventId: p.string().length(255).unique(),
    couponId: p.string().length(64).nullable(),
    requestId: p.string().length(128).nullable(),
    kind: p.string().length(16).nullable(),
    quantity: p.bigint('number'),
    shard: p.integer().nullable(),
    /** The event's user ('' → null) and when Redis applied it: a recovery restores a refused deduction's
     * record and user count from them. Null on rows from before m005. */
    userId: p.string().length(128).nullable(),
    occurredAt: p.bigint('number').nullable(),
    reason: p.string().length(64),
    detail: p.text(),
    /** The units went back to the Redis shard. */
    refunded: p.boolean().default(false),
    createdAt: p.datetime().length(3),
  },
  indexes: [
    { properties: ['couponId'], name: 'ix_anomaly_coupon' },
    { properties: ['couponId', 'reason'], name: 'ix_anomaly_coupon_reason' },
  ],
});

export const entities = [CouponRow, LedgerRow, AnomalyRow];
