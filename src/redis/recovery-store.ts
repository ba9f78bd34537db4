// The Redis side of a coupon recovery: pause, adjust, rebuild and resume shards (lua/shard-*.lua, called
// through scripts.ts), and write back the request records, user counts and claims a lost shard took with it.
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../domain/ports.js';
import { shardKeys } from './keys.js';
import type { ReplicaAck } from './replica-ack.js';
import { type PauseResult, Scripts } from './scripts.js';

export type { PauseResult } from './scripts.js';

export interface RestoredRecord {
  requestId: string;
  userId: string;
  quantity: number;
  occurredAt: number;
  compensated: boolean;
}

/** The pause (or its extension) lapsed under us: what the recovery read may have changed since. */
export class PauseLost extends Error {
  override name = 'PauseLost';
}

export class RedisRecoveryStore {
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: Cluster,
    private readonly namespace: string,
    private readonly replicaAck?: ReplicaAck,
  ) {
    this.scripts = new Scripts(redis, namespace);
  }

  pause(shard: ShardRef, token: string, holdMs: number, mode: 'new' | 'extend'): Promise<PauseResult> {
    return this.scripts.shardPause(shard, token, holdMs, mode);
  }

  resume(shard: ShardRef, token: string): Promise<boolean> {
    return this.scripts.shardResume(shard, token);
  }

  /** Credits (restock shares) first, then delta; returns the shard's available after it and the delta applied. */
  async adjust(shard: ShardRef, token: string, delta: number, credits: { id: string; quantity: number }[]) {
    const r = await this.scripts.shardAdjust(shard, token, delta, credits);
    if (r === null) throw new PauseLost(`the pause on shard ${shard.index} of coupon ${shard.couponId} lapsed`);
    await this.replicated(this.scripts.keys(shard).shard);
    return r;
  }

  async rebuild(shard: ShardRef, token: string, holdMs: number, available: number, net: number, creditIds: string[]): Promise<void> {
    if (!(await this.scripts.shardRebuild(shard, token, holdMs, available, net, creditIds))) {
      throw new PauseLost(`shard ${shard.index} of coupon ${shard.couponId} reappeared during its rebuild`);
    }
    await this.replicated(this.scripts.keys(shard).shard);
  }

  /** Records never overwrite an existing one; returns how many were written. */
  async restoreRecords(shard: ShardRef, records: RestoredRecord[], windowS: number): Promise<number> {
    const k = shardKeys(this.namespace, shard.tag);
    const now = Date.now();
    let written = 0;
    await inChunks(records, async (rec) => {
      const ttl = Math.max(1, Math.floor(windowS - (now - rec.occurredAt) / 1000));
      if (await this.scripts.recordRestore(shard, { ...rec, ttlS: ttl })) written++;
    });
    if (records.length > 0) await this.replicated(k.shard);
    return written;
  }

  /** The units each user holds of the coupon (limited coupons), on the user's home shard. */
  async restoreUserCounts(shard: ShardRef, users: Map<string, number>): Promise<void> {
    const k = shardKeys(this.namespace, shard.tag);
    await inChunks([...users], ([user, held]) => this.redis.set(k.user(user), Math.max(0, held)));
    if (users.size > 0) await this.replicated(k.shard);
  }

  /** Claims "user|quantity" on the request's own shard (limited coupons), never replacing one. */
  async restoreClaims(shard: ShardRef, claims: { requestId: string; value: string; ttlS: number }[]): Promise<void> {
    const k = shardKeys(this.namespace, shard.tag);
    await inChunks(claims, (c) => this.redis.set(k.claim(c.requestId), c.value, 'EX', Math.max(1, c.ttlS), 'NX'));
    if (claims.length > 0) await this.replicated(k.shard);
  }

  /** Whether a credit id was applied on a shard (a move whose units already landed at its target). */
  async landed(shard: ShardRef, creditId: string): Promise<boolean> {
    return (await this.redis.zscore(shardKeys(this.namespace, shard.tag).credits, creditId)) !== null;
  }

  private async replicated(key: string): Promise<void> {
    if (this.replicaAck) await this.replicaAck.afterWrite(key);
  }
}

/** Bounded concurrency: auto-pipelining batches what is in flight, without queueing 100k promises at once. */
async function inChunks<T>(items: T[], fn: (item: T) => Promise<unknown>, size = 2000): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}
