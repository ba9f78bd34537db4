// The sold-out marks of src/watch/stock-events.ts on Redis: one string per coupon, SET NX when it sells out,
// DEL when units come back; each answers whether this caller made the change, so one instance publishes.
import type { Cluster } from 'ioredis';
import { soldOutMarkKey } from './keys.js';

export interface StockEventMarks {
  /** true when the mark was not set (this call saw the sell-out first). */
  markSoldOut(couponId: string): Promise<boolean>;
  /** true when this call removed the mark (this call saw the return first). */
  clearSoldOut(couponId: string): Promise<boolean>;
}

/** A mark outlives any sale; it only has to expire for coupons that are never touched again. */
const MARK_TTL_S = 30 * 86_400;

export class RedisStockEventMarks implements StockEventMarks {
  constructor(
    private readonly redis: Cluster,
    private readonly namespace: string,
  ) {}

  async markSoldOut(couponId: string): Promise<boolean> {
    return (await this.redis.set(soldOutMarkKey(this.namespace, couponId), '1', 'EX', MARK_TTL_S, 'NX')) === 'OK';
  }

  async clearSoldOut(couponId: string): Promise<boolean> {
    return (await this.redis.del(soldOutMarkKey(this.namespace, couponId))) === 1;
  }
}
