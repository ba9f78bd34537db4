// Marks, in Redis, a deduction that MySQL refused (lua/refuse-mark-3.lua, through redis/scripts.ts): its units stay sold — never
// back on sale, since the record never had them — and a later Compensate closes it without returning them.
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../../domain/ports.js';
import type { ReplicaAck } from '../../redis/replica-ack.js';
import { Scripts } from '../../redis/scripts.js';

export interface RefusalStore {
  /** false: the request record is gone (expired or lost); nothing to mark. */
  markRefused(shard: ShardRef, requestId: string): Promise<boolean>;
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

  async markRefused(shard: ShardRef, requestId: string): Promise<boolean> {
    const marked = await this.scripts.refuseMark(shard, requestId);
    // Acknowledged in MySQL as handled once this returns: the mark must survive a failover like a Deduct.
    if (marked && this.replicaAck) await this.replicaAck.afterWrite(this.scripts.keys(shard).shard);
    return marked;
  }
}
