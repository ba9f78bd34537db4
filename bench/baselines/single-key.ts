// Baseline "single Redis key + Lua": one counter per coupon, one check-and-decrement script call per
// Deduct (bench/lua/single-key-deduct-1.lua). All of a hot coupon's traffic lands on one key, one node.
import type { Cluster } from 'ioredis';
import { DomainError } from '../../src/domain/errors.js';
import { mapLimit } from '../pool.js';
import { singleKey } from './keys.js';
import { script } from './redis.js';
import type { BaselineStore } from './store.js';

export function singleKeyStore(redis: Cluster, ns: string): BaselineStore {
  const deduct = script(redis, 'singleKeyDeduct');
  const stocks = new Map<string, number>();
  return {
    async deduct({ couponId, quantity }) {
      const r = (await deduct(singleKey(ns, couponId), quantity)) as number[];
      if (r[0] === 1) return { outcome: 'deducted', remaining: r[1]! };
      if (r[0] === -1) return { outcome: r[1] === 0 ? 'sold_out' : 'insufficient', remaining: r[1]! };
      throw new DomainError('not_found', `coupon ${couponId} does not exist`);
    },
    async create(list) {
      await mapLimit(list, 256, async ({ id, stock }) => {
        await redis.set(singleKey(ns, id), stock);
        stocks.set(id, stock);
      });
    },
    async levels(ids) {
      return mapLimit(ids, 256, async (id) => ({
        id,
        stock: stocks.get(id) ?? 0,
        remaining: Number((await redis.get(singleKey(ns, id))) ?? 0),
      }));
    },
    async close() {},
  };
}
