// Baseline "lock" (Redisson style): take a lease lock with SET NX PX, read the stock, check, DECRBY, release
// through an owner-checked script (bench/lua/lock-release-1.lua). A busy lock is retried with a small
// randomised exponential backoff (no pub/sub wake-up), up to a deadline.
import { randomBytes } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { DomainError } from '../../src/domain/errors.js';
import { mapLimit, sleep } from '../pool.js';
import { lockKeys } from './keys.js';
import { script } from './redis.js';
import type { BaselineStore } from './store.js';

/** Long enough that no holder outlives its lease on a loaded box (an expired lease could oversell). */
const LEASE_MS = 5_000;
const ACQUIRE_DEADLINE_MS = 15_000;
const MAX_BACKOFF_MS = 16;

export function lockStore(redis: Cluster, ns: string): BaselineStore {
  const release = script(redis, 'lockRelease');
  const stocks = new Map<string, number>();
  const tokenBase = randomBytes(6).toString('hex');
  let tokens = 0;

  async function acquire(lock: string, token: string): Promise<void> {
    const deadline = Date.now() + ACQUIRE_DEADLINE_MS;
    let backoff = 1;
    while ((await redis.set(lock, token, 'PX', LEASE_MS, 'NX')) !== 'OK') {
      if (Date.now() > deadline) throw new DomainError('aborted', `lock ${lock} stayed busy for ${ACQUIRE_DEADLINE_MS} ms`);
      await sleep(Math.random() * backoff);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  return {
    async deduct({ couponId, quantity }) {
      const k = lockKeys(ns, couponId);
      const token = `${tokenBase}:${++tokens}`;
      await acquire(k.lock, token);
      try {
        const raw = await redis.get(k.stock);
        if (raw === null) throw new DomainError('not_found', `coupon ${couponId} does not exist`);
        const stock = Number(raw);
        if (stock < quantity) return { outcome: stock === 0 ? 'sold_out' : 'insufficient', remaining: stock };
        return { outcome: 'deducted', remaining: await redis.decrby(k.stock, quantity) };
      } finally {
        await release(k.lock, token);
      }
    },
    async create(list) {
      await mapLimit(list, 256, async ({ id, stock }) => {
        await redis.set(lockKeys(ns, id).stock, stock);
        stocks.set(id, stock);
      });
    },
    async levels(ids) {
      return mapLimit(ids, 256, async (id) => ({
        id,
        stock: stocks.get(id) ?? 0,
        remaining: Number((await redis.get(lockKeys(ns, id).stock)) ?? 0),
      }));
    },
    async close() {},
  };
}
