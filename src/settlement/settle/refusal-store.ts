// Marks, in Redis, a deduction that MySQL refused (lua/refuse-mark-1.lua): its units stay sold — never
// back on sale, since the record never had them — and a later Compensate closes it without returning them.
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../../domain/ports.js';
import { scriptFn } from '../../redis/cluster.js';
import { shardKeys } from '../../redis/keys.js';
import type { ReplicaAck } from '../../redis/replica-ack.js';

export interface RefusalStore {
  /** false: the request record is gone (expired or lost); nothing to mark. */
  markRefused(shard: ShardRef, requestId: string): Promise<boolean>;
}

export class RedisRefusalStore implements RefusalStore {
  private readonly script;

  constructor(
    redis: Cluster,
    private readonly namespace: string,
    private readonly replicaAck?: ReplicaAck,
  ) {
    this.script = scriptFn(redis, 'refuseMark');
  }

  async markRefused(shard: ShardRef, requestId: string): Promise<boolean> {
    const key = shardKeys(this.namespace, shard.tag).request(requestId);
    const marked = Number(await this.script(key)) === 1;
    // Acknowledged in MySQL as handled once this returns: the mark must survive a failover like a Deduct.
    if (marked && this.replicaAck) await this.replicaAck.afterWrite(key);
    return marked;
  }
}
