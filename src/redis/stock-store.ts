// StockStore on Redis Cluster: one typed caller per Lua script, turning its return codes into typed results.
import type { Cluster } from 'ioredis';
import type {
  CompensateScriptResult,
  Credit,
  DeductScriptInput,
  DeductScriptResult,
  PendingMove,
  ShardLevel,
  ShardRef,
  StockStore,
} from '../domain/ports.js';
import { scriptFn } from './cluster.js';
import { RELAY_GROUP, shardKeys, type ShardKeys } from './keys.js';
import type { ReplicaAck } from './replica-ack.js';
import { parseShardLevel, SHARD_LEVEL_FIELDS } from './shard-level.js';

/** Applied credit ids are kept this long: far longer than any move or restock stays unfinished. */
const CREDIT_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** A limited coupon's request claim lives this long until its deduction is made (then: the idempotency window).
 * Far longer than a call lasts, and short enough that a flood of refused request ids cannot fill Redis. */
export const CLAIM_HOLD_S = 60;

type Reply = (string | number | null)[];

export interface RedisStockStoreOptions {
  namespace: string;
  idempotencyWindowS: number;
  /** When set, Deduct and Compensate writes wait for a replica before resolving. */
  replicaAck?: ReplicaAck | undefined;
  /** When set, writes to a slot whose master just changed are refused until it is confirmed (failover-fence.ts). */
  fence?: { assertOpen(key: string): void; retryAfterMs?(key: string): number | undefined } | undefined;
}

export class RedisStockStore implements StockStore {
  private readonly keyCache = new Map<string, ShardKeys>();
  private readonly shardInit;
  private readonly deductScript;
  private readonly compensateScript;
  private readonly moveOutScript;
  private readonly moveAckScript;
  private readonly creditScript;
  private readonly claimScript;
  private readonly claimReadScript;

  constructor(
    private readonly redis: Cluster,
    private readonly options: RedisStockStoreOptions,
  ) {
    this.shardInit = scriptFn(redis, 'shardInit');
    this.deductScript = scriptFn(redis, 'deduct');
    this.compensateScript = scriptFn(redis, 'compensate');
    this.moveOutScript = scriptFn(redis, 'moveOut');
    this.moveAckScript = scriptFn(redis, 'moveAck');
    this.creditScript = scriptFn(redis, 'credit');
    this.claimScript = scriptFn(redis, 'claim');
    this.claimReadScript = scriptFn(redis, 'claimRead');
  }

  keys(shard: ShardRef): ShardKeys {
    let k = this.keyCache.get(shard.tag);
    if (!k) {
      k = shardKeys(this.options.namespace, shard.tag);
      if (this.keyCache.size > 100_000) this.keyCache.clear();
      this.keyCache.set(shard.tag, k);
    }
    return k;
  }

  async initShard(shard: ShardRef, available: number, net = 0): Promise<boolean> {
    const k = this.keys(shard);
    return (await this.shardInit(k.shard, k.outbox, available, RELAY_GROUP, net)) === 1;
  }

  async deduct(shard: ShardRef, input: DeductScriptInput, credits: Credit[], creditEpoch = ''): Promise<DeductScriptResult> {
    const k = this.keys(shard);
    const args: (string | number)[] = [
      k.shard,
      k.request(input.requestId),
      k.user(input.userId || '-'),
      k.outbox,
      k.credits,
      input.requestId,
      input.userId,
      input.quantity,
      input.perUserLimit,
      this.options.idempotencyWindowS,
      shard.index,
      shard.couponId,
      Date.now(),
      CREDIT_RETENTION_MS,
      creditEpoch,
    ];
    for (const c of credits) args.push(c.id, c.quantity);
    const owner = this.beforeWrite(k.shard);
    const r = (await this.deductScript(...args)) as Reply;
    const code = Number(r[0]);
    if (code === 1) {
      await this.replicated(k.shard, owner);
      return { kind: 'deducted', remaining: Number(r[1]) };
    }
    if (code === 2) {
      // The original write may not have reached a replica when it was answered (e.g. the WAIT timed out).
      await this.vouch(k, owner);
      return { kind: 'replay', remaining: Number(r[1]), compensated: Number(r[2]) === 1 };
    }
    if (credits.length > 0) await this.replicated(k.shard, owner);
    if (code === -1) return { kind: 'short', available: Number(r[1]), epoch: String(r[2] ?? '') };
    if (code === -2) return { kind: 'user_limit', held: Number(r[1]) };
    if (code === -3) return { kind: 'conflict', field: r[1] === 'user_id' ? 'user_id' : 'quantity', recorded: String(r[2] ?? '') };
    if (code === -4) return { kind: 'missing' };
    if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
    if (code === -7) return { kind: 'stale_credits' };
    throw new Error(`deduct-5.lua returned unknown code ${code}`);
  }

  async compensate(shard: ShardRef, requestId: string, reason: string, limitedUserId: string | undefined): Promise<CompensateScriptResult> {
    const k = this.keys(shard);
    const owner = this.beforeWrite(k.shard);
    const r = (await this.compensateScript(
      k.shard,
      k.request(requestId),
      k.user(limitedUserId ?? '-'),
      k.outbox,
      requestId,
      reason,
      shard.couponId,
      shard.index,
      Date.now(),
      limitedUserId === undefined ? 0 : 1,
    )) as Reply;
    const code = Number(r[0]);
    if (code === 1) {
      await this.replicated(k.shard, owner);
      return { kind: 'compensated', remaining: Number(r[1]), quantity: Number(r[2]) };
    }
    if (code === 2) {
      await this.vouch(k, owner);
      return { kind: 'already', remaining: Number(r[1]) };
    }
    if (code === 3) return { kind: 'not_deducted' };
    if (code === -4) return { kind: 'missing' };
    if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
    throw new Error(`compensate-4.lua returned unknown code ${code}`);
  }

  async claimRequest(shard: ShardRef, requestId: string, value: string): Promise<string | null | 'missing'> {
    const k = this.keys(shard);
    this.options.fence?.assertOpen(k.claim(requestId));
    const r = (await this.claimScript(
      k.shard,
      k.claim(requestId),
      value,
      Math.min(CLAIM_HOLD_S, this.options.idempotencyWindowS),
    )) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    return code === 1 ? String(r[1]) : null;
  }

  async keepClaim(shard: ShardRef, requestId: string, value: string): Promise<void> {
    const key = this.keys(shard).claim(requestId);
    const held = await this.redis.getex(key, 'EX', this.options.idempotencyWindowS);
    // Gone only when the call outlived the hold: put it back for the window. Held by another user (claimed
    // after it lapsed) cannot be undone here; that user's own deduction is refused or recorded on its shard.
    if (held === null) await this.redis.set(key, value, 'EX', this.options.idempotencyWindowS, 'NX');
  }

  async readClaim(shard: ShardRef, requestId: string): Promise<string | null | 'missing'> {
    const k = this.keys(shard);
    const r = (await this.claimReadScript(k.shard, k.claim(requestId))) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    return code === 1 ? String(r[1]) : null;
  }

  async readRequest(shard: ShardRef, requestId: string) {
    const k = this.keys(shard);
    const owner = this.options.replicaAck?.owner(k.shard);
    const [u, q, r, c] = await this.redis.hmget(k.request(requestId), 'u', 'q', 'r', 'c');
    if (q === null || q === undefined) return null;
    await this.vouch(k, owner);
    return { userId: u ?? '', quantity: Number(q), remaining: Number(r), compensated: c === '1' };
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
    const taken = Number(await this.moveOutScript(k.shard, k.moves, moveId, target, want, Date.now()));
    if (taken === -4) return 'missing';
    if (taken === -5) return 'paused';
    // A move out of a shard is a write that must survive a failover as much as the deduction it feeds.
    if (taken > 0) await this.replicated(k.shard, owner);
    return taken;
  }

  async ackMove(source: ShardRef, moveId: string): Promise<boolean> {
    const k = this.keys(source);
    return Number(await this.moveAckScript(k.shard, k.moves, moveId)) === 1;
  }

  async credit(shard: ShardRef, creditId: string, quantity: number): Promise<'applied' | 'already' | 'missing' | 'paused'> {
    const k = this.keys(shard);
    const owner = this.beforeWrite(k.shard);
    const r = (await this.creditScript(k.shard, k.credits, creditId, quantity, Date.now(), CREDIT_RETENTION_MS)) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    if (code === -5) return 'paused';
    await this.replicated(k.shard, owner);
    return code === 1 ? 'applied' : 'already';
  }

  async pendingMoves(shard: ShardRef): Promise<PendingMove[]> {
    const all = await this.redis.hgetall(this.keys(shard).moves);
    return Object.entries(all).map(([moveId, v]) => {
      const [target, quantity, startedMs] = v.split('|');
      return { moveId, target: Number(target), quantity: Number(quantity), startedMs: Number(startedMs) };
    });
  }

  /** Refuses a write to a fenced slot; returns the slot's master as the write is sent. */
  private beforeWrite(key: string): string | undefined {
    this.options.fence?.assertOpen(key);
    return this.options.replicaAck?.owner(key);
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
