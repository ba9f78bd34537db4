// One request's record on its shard, every field as the scripts wrote it (deduct-5.lua: u q r s t;
// compensate-4.lua: c; refuse-mark-1.lua: x), for the audit API. A plain read: it writes nothing.
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../domain/ports.js';
import type { RequestRecordView } from '../audit/audit-service.js';
import { shardKeys } from './keys.js';

export class RedisRequestRecords {
  constructor(
    private readonly redis: Cluster,
    private readonly namespace: string,
  ) {}

  async read(shard: ShardRef, requestId: string): Promise<RequestRecordView | null> {
    const h = await this.redis.hgetall(shardKeys(this.namespace, shard.tag).request(requestId));
    if (h.q === undefined) return null;
    return {
      shard: shard.index,
      userId: h.u ?? '',
      quantity: Number(h.q),
      remaining: Number(h.r ?? 0),
      compensated: h.c === '1',
      refused: h.x === '1',
      deductedAt: h.t === undefined ? null : Number(h.t),
    };
  }

  /** The "user|quantity" claim of a request of a limited coupon (which user's shard holds its record). */
  readClaim(shard: ShardRef, requestId: string): Promise<string | null> {
    return this.redis.get(shardKeys(this.namespace, shard.tag).claim(requestId));
  }
}
