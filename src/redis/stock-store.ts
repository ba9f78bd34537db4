// StockStore on Redis Cluster over the Lua callers in scripts.ts: adds what the domain asks around a script
// call — the failover fence before a write, the replica ack after it, the vouching write for a replay.
import type { Cluster } from 'ioredis';
import type {
  CompensateScriptResult,
  Credit,
  CreditResult,
  DeductScriptInput,
  DeductScriptResult,
  PendingMove,
  ShardLevel,
  ShardRef,
  StockStore,
} from '../domain/ports.js';
import type { ShardKeys } from './keys.js';
import { loadOnMaster, masterOf, sendOnMaster } from './master-pipeline.js';
import type { ReplicaAck } from './replica-ack.js';
import { Scripts } from './scripts.js';
import { RecordReadBatcher } from './record-read-batcher.js';
import { ShardBatcher } from './shard-batcher.js';
import { parseShardLevel, SHARD_LEVEL_FIELDS } from './shard-level.js';
import { parsePendingMoves } from './pending-moves.js';

/** Applied credit ids are kept this long: far longer than any move or restock stays unfinished. */
const CREDIT_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** A limited coupon's request claim lives this long until its deduction is made (then: the idempotency window).
 * Far longer than a call lasts, and short enough that a flood of refused request ids cannot fill Redis. */
export const CLAIM_HOLD_S = 60;

export interface RedisStockStoreOptions {
  namespace: string;
  idempotencyWindowS: number;
  /** When set, Deduct and Compensate writes wait for a replica before resolving. */
  replicaAck?: ReplicaAck | undefined;
  /** When set, writes to a slot whose master just changed are refused until it is confirmed (failover-fence.ts). */
  fence?: { assertOpen(key: string): void; retryAfterMs?(key: string): number | undefined } | undefined;
  /** Group commit per shard (shard-batcher.ts); off when absent or max <= 1. */
  batch?:
    | {
        max: number;
        waitUs: number;
        gapUs?: number | undefined;
        gapFrom?: number | undefined;
        onBatch?: ((size: number) => void) | undefined;
        /** Every batch of record reads (the sold-out fast path), as sent. */
        onReadBatch?: ((size: number) => void) | undefined;
      }
    | undefined;
}

export class RedisStockStore implements StockStore {
  private readonly scripts: Scripts;
  private readonly batcher: ShardBatcher | undefined;
  private readonly reads: RecordReadBatcher | undefined;

  constructor(
    private readonly redis: Cluster,
    private readonly options: RedisStockStoreOptions,
  ) {
    this.scripts = new Scripts(redis, options.namespace, options.idempotencyWindowS);
    const batch = options.batch;
    this.batcher =
      batch && batch.max > 1
        ? new ShardBatcher(this.scripts, {
            ...batch,
            vouch: options.replicaAck !== undefined,
            beforeWrite: (key) => this.beforeWrite(key),
            afterWrite: (key, owner) => this.replicated(key, owner),
            onMaster: options.replicaAck
              ? (node, commands) => options.replicaAck!.pipelineWithWait(node, commands)
              : async (node, commands) => {
                  const results = await sendOnMaster(redis, node, commands);
                  return results && { results, ack: null };
                },
            onRedirect: () => void redis.refreshSlotsCache(),
            loadScript: (node, lua) => loadOnMaster(redis, node, lua),
          })
        : undefined;
    this.reads =
      batch && batch.max > 1
        ? new RecordReadBatcher(this.scripts, batch.max, batch.onReadBatch, {
            masterOf: (key) => masterOf(redis, key),
            send: async (node, command, asking) => (await sendOnMaster(redis, node, asking ? [['asking'], command] : [command]))?.at(-1),
            loadScript: (node, lua) => loadOnMaster(redis, node, lua),
            onRedirect: () => void redis.refreshSlotsCache(),
          })
        : undefined;
  }

  /** The group commit's Reserve, for the hold store (hold-store.ts), so that Reserves join their shard's
   * batch; undefined when group commit is off. */
  reserveBatcher(): Pick<ShardBatcher, 'reserve'> | undefined {
    return this.batcher;
  }

  keys(shard: ShardRef): ShardKeys {
    return this.scripts.keys(shard);
  }

  initShard(shard: ShardRef, available: number, net = 0): Promise<boolean> {
    return this.scripts.shardInit(shard, available, net);
  }

  async deduct(
    shard: ShardRef,
    input: DeductScriptInput,
    credits: Credit[],
    creditEpoch = '',
    signal?: AbortSignal,
  ): Promise<DeductScriptResult> {
    // Fallback credits are rare and carry their own checks (deduct-7.lua): those calls go alone.
    if (this.batcher && credits.length === 0) return this.batcher.deduct(shard, input, signal);
    const k = this.keys(shard);
    const owner = this.beforeWrite(k.shard);
    const r = await this.scripts.deduct(shard, input, credits, creditEpoch, CREDIT_RETENTION_MS);
    if (r.kind === 'deducted') await this.replicated(k.shard, owner);
    // The original write may not have reached a replica when it was answered (e.g. the WAIT timed out).
    else if (r.kind === 'replay') await this.vouch(k, owner);
    else if (credits.length > 0) await this.replicated(k.shard, owner);
    return r;
  }

  async compensate(
    shard: ShardRef,
    requestId: string,
    reason: string,
    limitedUserId: string | undefined,
    signal?: AbortSignal,
  ): Promise<CompensateScriptResult> {
    if (this.batcher) return this.batcher.compensate(shard, requestId, reason, limitedUserId !== undefined, signal);
    const k = this.keys(shard);
    const owner = this.beforeWrite(k.shard);
    const r = await this.scripts.compensate(shard, requestId, reason, limitedUserId !== undefined);
    if (r.kind === 'compensated') await this.replicated(k.shard, owner);
    else if (r.kind === 'already') await this.vouch(k, owner);
    return r;
  }

  async claimRequest(shard: ShardRef, requestId: string, value: string): Promise<string | null | 'missing'> {
    this.options.fence?.assertOpen(this.keys(shard).shard);
    return this.scripts.claim(shard, requestId, value, Math.min(CLAIM_HOLD_S, this.options.idempotencyWindowS));
  }

  async keepClaim(shard: ShardRef, requestId: string, value: string): Promise<void> {
    // Gone only when the call outlived the hold: put back for the window. Held by another user (claimed after
    // it lapsed) cannot be undone here; that user's own deduction is refused or recorded on its shard.
    await this.scripts.claimKeep(shard, requestId, value, false);
  }

  readClaim(shard: ShardRef, requestId: string): Promise<string | null | 'missing'> {
    return this.scripts.claimRead(shard, requestId);
  }

  async readRequest(shard: ShardRef, requestId: string) {
    const k = this.keys(shard);
    const owner = this.options.replicaAck?.owner(k.shard);
    const rec = await (this.reads ? this.reads.read(shard, requestId) : this.scripts.recordRead(shard, requestId));
    if (rec === null || rec === 'missing') return rec;
    await this.vouch(k, owner);
    return { userId: rec.userId, quantity: rec.quantity, remaining: rec.remaining, compensated: rec.compensated, reserve: rec.reserve };
  }

  /** The sold-out fast path's record reads since start, and the script calls that carried them. */
  recordReadStats(): { recordReads: number; recordReadCalls: number } {
    const sent = this.reads?.sent;
    return { recordReads: sent?.reads ?? 0, recordReadCalls: sent?.calls ?? 0 };
  }

  /** Group commit since start: Redis calls, the shard batches they carried, the requests in those, and the
   * batches sent again after their connection closed. */
  batchStats(): { batchCalls: number; batchShards: number; batchRequests: number; batchResent: number } {
    const sent = this.batcher?.sent;
    return {
      batchCalls: sent?.calls ?? 0,
      batchShards: sent?.shards ?? 0,
      batchRequests: sent?.requests ?? 0,
      batchResent: sent?.resent ?? 0,
    };
  }

  async probe(shards: ShardRef[]): Promise<ShardLevel[]> {
    return Promise.all(
      shards.map(async (s) => {
        const level = parseShardLevel(s.index, await this.redis.hmget(this.keys(s).shard, ...SHARD_LEVEL_FIELDS));
        const fencedRetryAfterMs = this.options.fence?.retryAfterMs?.(this.keys(s).shard);
        return fencedRetryAfterMs === undefined ? level : { ...level, fencedRetryAfterMs };
      }),
    );
  }

  async moveOut(source: ShardRef, moveId: string, target: number, want: number): Promise<number | 'missing' | 'paused'> {
    const k = this.keys(source);
    const owner = this.beforeWrite(k.shard);
    const taken = await this.scripts.moveOut(source, moveId, target, want);
    if (typeof taken !== 'number') return taken;
    // A move out of a shard is a write that must survive a failover as much as the deduction it feeds.
    if (taken > 0) await this.replicated(k.shard, owner);
    return taken;
  }

  ackMove(source: ShardRef, moveId: string): Promise<boolean> {
    return this.scripts.moveAck(source, moveId);
  }

  async credit(shard: ShardRef, creditId: string, quantity: number, epoch?: string): Promise<CreditResult> {
    const k = this.keys(shard);
    const owner = this.beforeWrite(k.shard);
    const r = await this.scripts.credit(shard, creditId, quantity, CREDIT_RETENTION_MS, epoch);
    if (r === 'applied' || r === 'already') await this.replicated(k.shard, owner);
    return r;
  }

  epochs(shards: ShardRef[]): Promise<(string | null)[]> {
    return Promise.all(
      shards.map(async (s) => {
        const [avail, ep] = await this.redis.hmget(this.keys(s).shard, 'avail', 'ep');
        return avail === null ? null : (ep ?? '');
      }),
    );
  }

  async pendingMoves(shard: ShardRef): Promise<PendingMove[]> {
    return parsePendingMoves(await this.redis.hgetall(this.keys(shard).moves));
  }

  /** Refuses a write to a fenced slot; returns the slot's master as the client routes to it now, as the write
   * is sent (afterWrite's check at the `replica` level; the group commit's one call per master at both levels). */
  private beforeWrite(key: string): string | undefined {
    this.options.fence?.assertOpen(key);
    return masterOf(this.redis, key);
  }

  private async replicated(key: string, ownerBefore: string | undefined): Promise<void> {
    if (this.options.replicaAck) await this.options.replicaAck.afterWrite(key, ownerBefore);
  }

  /** For an answer that vouches for an earlier write but wrote nothing itself (a replay, ALREADY_COMPENSATED,
   * the sold-out fast path's replay). WAIT waits for the offset its connection last stamped: Redis 7.0 stamps it
   * after every command (so the read itself would do), but from 7.2 only a command that propagated does, and a
   * WAIT on a connection whose last write predates the one vouched for (another instance, a reconnect) returns
   * at once. A tiny write in the same slot, on the connection the WAIT is sent on, comes after the earlier write
   * in the master's one replication stream: once it is on a replica, so is everything before it. */
  private async vouch(k: ShardKeys, ownerBefore: string | undefined): Promise<void> {
    if (!this.options.replicaAck) return;
    this.options.fence?.assertOpen(k.ack);
    await this.redis.set(k.ack, Date.now(), 'EX', this.options.idempotencyWindowS);
    await this.replicated(k.shard, ownerBefore);
  }
}
