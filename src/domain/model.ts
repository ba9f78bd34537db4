// What the domain is about: a coupon, its level as callers see it, and what each use case is asked. Ports
// (ports.ts) and use cases speak in these types; transports convert their messages to and from them.
import type { Instant, SaleStatus } from './sale.js';

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
  /** Sale window and kill switch (src/domain/sale.ts); absent on records older than them = always open. */
  sale?: SaleSettings;
}

export interface SaleSettings {
  /** ms since epoch; null = open since creation. */
  startsAt: number | null;
  /** ms since epoch, exclusive; null = no end. */
  endsAt: number | null;
  paused: boolean;
  /** Bumped by every change in MySQL: an instance applies a change only if it is newer than what it holds. */
  revision: number;
}

/** A coupon's sale settings with their status at `now`. */
export interface SaleView {
  startsAt: number | null;
  endsAt: number | null;
  paused: boolean;
  status: SaleStatus;
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
  /** Units in open holds: neither available nor deducted (absent: none). */
  held?: number;
  shards: { index: number; available: number; inTransit: number; held?: number }[];
  observedAt: Date;
  /** Absent only in levels built by hand (tests). */
  sale?: SaleView;
}

// The inputs, as the caller sent them (unvalidated: each use case checks its fields and names the bad one).
// Counts are bigint so an out-of-range value is reported as sent, not rounded.

export interface CreateCouponInput {
  couponId: string;
  totalStock: bigint;
  shardCount: number;
  perUserLimit: number;
  /** Optional sale window; not part of the definition (a replay neither compares nor changes it). */
  startsAt?: Instant;
  endsAt?: Instant;
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
  /** Grant what is left up to `quantity` rather than answering insufficient. */
  allowPartial?: boolean;
}

export interface CompensateInput {
  couponId: string;
  requestId: string;
  reason: string;
}
