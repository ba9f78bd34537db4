// Marks, in Redis, a deduction that MySQL refused (lua/refuse-mark-3.lua, through redis/scripts.ts): its units stay sold — never
// back on sale, since the record never had them — and a later Compensate closes it without returning them.
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../../domain/ports.js';
import type { ReplicaAck } from '../../redis/replica-ack.js';
import { type RefuseMarkResult, Scripts } from '../../redis/scripts.js';

export interface RefusalStore {
  /** 'gone': the request record is gone (expired or lost), nothing to mark. 'given_back': a Compensate that ran
   * before the mark found none and put the units back on sale; they must be taken away again (a repair). */
  markRefused(shard: ShardRef, requestId: string): Promise<RefuseMarkResult>;
}

export class RedisRefusalStore implements RefusalStore {
  private readonly scripts: Scripts;

  constructor(
    redis: Cluster,
    namespace: string,
    windowS: number,
    private readonly replicaAck?: ReplicaAck,
  ) {
    this.scripts = new Scripts(redis, namespace, windowS);
  }

  async markRefused(shard: ShardRef, requestId: string): Promise<RefuseMarkResult> {
    const marked = await this.scripts.refuseMark(shard, requestId);
    // Acknowledged in MySQL as handled once this returns: the mark must survive a failover like a Deduct.
    if (marked !== 'gone' && this.replicaAck) await this.replicaAck.afterWrite(this.scripts.keys(shard).shard);
    return marked;
  }
}
