// The low-stock marks of src/watch/low-stock.ts on Redis: one string per coupon, SET NX to trip, DEL to re-arm.
import type { Cluster } from 'ioredis';
import type { LowStockMarks } from '../watch/low-stock.js';
import { lowStockKey } from './keys.js';

/** A mark outlives any sale; it only has to expire for coupons that are never touched again. */
const MARK_TTL_S = 30 * 86_400;

export class RedisLowStockMarks implements LowStockMarks {
  constructor(
    private readonly redis: Cluster,
    private readonly namespace: string,
  ) {}

  async trip(couponId: string): Promise<boolean> {
    return (await this.redis.set(lowStockKey(this.namespace, couponId), '1', 'EX', MARK_TTL_S, 'NX')) === 'OK';
  }

  async rearm(couponId: string): Promise<void> {
    await this.redis.del(lowStockKey(this.namespace, couponId));
  }
}
