// Gives the units of a deduction MySQL refused back to the Redis shard that served it (lua/refund-4.lua).
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../domain/ports.js';
import { scriptFn } from '../redis/cluster.js';
import { shardKeys } from '../redis/keys.js';
import type { ReplicaAck } from '../redis/replica-ack.js';

export type RefundResult = 'refunded' | 'already' | 'compensated_before' | 'missing';

export interface RefundStore {
  /** limitedUserId: the deduction's user when the coupon has a per-user limit (the count is given back). */
  refund(shard: ShardRef, creditId: string, requestId: string, quantity: number, limitedUserId: string | undefined): Promise<RefundResult>;
}

/** Same retention as the other credit ids (stock-store.ts). */
const CREDIT_RETENTION_MS = 7 * 24 * 3600 * 1000;

export class RedisRefundStore implements RefundStore {
  private readonly script;

  constructor(
    redis: Cluster,
    private readonly namespace: string,
    private readonly replicaAck?: ReplicaAck,
  ) {
    this.script = scriptFn(redis, 'refund');
  }

  async refund(
    shard: ShardRef,
    creditId: string,
    requestId: string,
    quantity: number,
    limitedUserId: string | undefined,
  ): Promise<RefundResult> {
    const k = shardKeys(this.namespace, shard.tag);
    const r = (await this.script(
      k.shard,
      k.credits,
      k.request(requestId),
      k.user(limitedUserId ?? '-'),
      creditId,
      quantity,
      Date.now(),
      CREDIT_RETENTION_MS,
      limitedUserId === undefined ? 0 : 1,
    )) as number[];
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    // The refund is recorded in MySQL as done once this returns: it must survive a failover like a Deduct.
    if (code === 1 && this.replicaAck) await this.replicaAck.afterWrite(k.shard);
    return code === 1 ? 'refunded' : code === 2 ? 'compensated_before' : 'already';
  }
}
