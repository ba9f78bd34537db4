// What the domain is about: a coupon, its level as callers see it, and what each use case is asked. Ports
// (ports.ts) and use cases speak in these types; transports convert their messages to and from them.

export interface Coupon {
  id: string;
  initialStock: number;
  /** Initial stock plus restocks. */
  totalStock: number;
  shardCount: number;
  perUserLimit: number;
  /** Hash tag of each shard, index = shard number. */
  shardTags: string[];
  preheated: boolean;
  settledRemaining: number;
  createdAt: Date;
}

/** One shard of one coupon: its index and the hash tag its keys share. */
export interface ShardRef {
  couponId: string;
  index: number;
  tag: string;
}

/** A coupon's level as GetStock, Restock, WatchStock and the metrics report it. */
export interface StockLevel {
  couponId: string;
  totalStock: number;
  available: number;
  deducted: number;
  settledRemaining: number;
  pendingSettlement: number;
  soldOut: boolean;
  shards: { index: number; available: number; inTransit: number }[];
  observedAt: Date;
}

// The inputs, as the caller sent them (unvalidated: each use case checks its fields and names the bad one).
// Counts are bigint so an out-of-range value is reported as sent, not rounded.

export interface CreateCouponInput {
  couponId: string;
  totalStock: bigint;
  shardCount: number;
  perUserLimit: number;
}

export interface RestockInput {
  couponId: string;
  quantity: bigint;
  requestId: string;
}

export interface DeductInput {
  couponId: string;
  requestId: string;
  userId: string;
  quantity: bigint;
}

export interface CompensateInput {
  couponId: string;
  requestId: string;
  reason: string;
}
