// Which shard serves a request. Limited coupons route by user, so one user's count and the request record
// share a slot; unlimited coupons route by request id, so a request id reused with another user or quantity
// lands on the shard that recorded it and is caught there, and Compensate finds it from the request id alone.
import type { Coupon, ShardRef } from './ports.js';

/** FNV-1a, 32 bit: cheap, stable across processes and releases (it decides where records live). */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function shardOf(coupon: Pick<Coupon, 'shardCount'>, routingKey: string): number {
  return fnv1a(routingKey) % coupon.shardCount;
}

export function shardRef(coupon: Pick<Coupon, 'id' | 'shardTags'>, index: number): ShardRef {
  return { couponId: coupon.id, index, tag: coupon.shardTags[index]! };
}

export function allShards(coupon: Pick<Coupon, 'id' | 'shardTags'>): ShardRef[] {
  return coupon.shardTags.map((tag, index) => ({ couponId: coupon.id, index, tag }));
}

/** The shard holding the request's record (and the user's count on limited coupons). */
export function homeShard(coupon: Coupon, requestId: string, userId: string): number {
  return shardOf(coupon, coupon.perUserLimit > 0 ? `u:${userId}` : `r:${requestId}`);
}

/** Limited coupons only: the shard holding the request's claim ("user|quantity"). */
export function claimShard(coupon: Coupon, requestId: string): number {
  return shardOf(coupon, `r:${requestId}`);
}

/** Splits `total` units over `n` shards as evenly as integers allow (the first total mod n get one more). */
export function splitEvenly(total: number, n: number): number[] {
  const base = Math.floor(total / n);
  const extra = total % n;
  return Array.from({ length: n }, (_, i) => base + (i < extra ? 1 : 0));
}
