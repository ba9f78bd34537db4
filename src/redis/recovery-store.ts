// The Redis side of a coupon recovery: pause, adjust, rebuild and resume shards (lua/shard-*.lua, called
// through scripts.ts), and write back the request records, user counts and claims a lost shard took with it.
import type { Cluster } from 'ioredis';
import type { ShardRef } from '../domain/ports.js';
import { parseHold, recordValue } from './hold-store.js';
import { firstBucket, requestIdOfField } from './keys.js';
import { type RequestRecord, unpackRecord } from './request-record.js';
import type { ReplicaAck } from './replica-ack.js';
import { type PauseResult, type RecordToRestore, Scripts } from './scripts.js';

export type { PauseResult } from './scripts.js';
/** One request record a rebuilt shard gets back (record-restore-3.lua). */
export type { RecordToRestore as RestoredRecord } from './scripts.js';

/** The pause (or its extension) lapsed under us: what the recovery read may have changed since. */
export class PauseLost extends Error {
  override name = 'PauseLost';
}

export class RedisRecoveryStore {
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: Cluster,
    namespace: string,
    private readonly windowS: number,
    private readonly replicaAck?: ReplicaAck,
  ) {
    this.scripts = new Scripts(redis, namespace, windowS);
  }

  /** Every deduction recorded on the shard within the idempotency window (the three buckets a call reads),
   * by request id; holds are left out. A plain scan: it writes nothing. */
  async deductionRecords(shard: ShardRef): Promise<Map<string, RequestRecord>> {
    const out = new Map<string, RequestRecord>();
    const keys = this.scripts.keys(shard);
    const first = firstBucket(Date.now(), this.windowS);
    for (const key of [keys.records(first), keys.records(first + 1), keys.records(first + 2)]) {
      let cursor = '0';
      do {
        const [next, flat] = await this.redis.hscanBuffer(key, cursor, 'COUNT', 1000);
        cursor = next.toString();
        for (let i = 0; i + 1 < flat.length; i += 2) {
          const packed = flat[i + 1]!.toString('utf8');
          // A deduction's record starts with its quantity; a hold's value with 'h'.
          if (/^\d/.test(packed)) out.set(requestIdOfField(flat[i]!), unpackRecord(packed));
        }
      } while (cursor !== '0');
    }
    return out;
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
  async restoreRecords(shard: ShardRef, records: RecordToRestore[]): Promise<number> {
    let written = 0;
    await inChunks(records, async (rec) => {
      if (await this.scripts.recordRestore(shard, rec)) written++;
    });
    if (records.length > 0) await this.replicated(this.scripts.keys(shard).shard);
    return written;
  }

  /** Replaces a rebuilt shard's user counts (limited coupons) with the units each user holds of the coupon.
   * Replaced, not merged: when only the shard's hash was lost, its user counts survive and still include the
   * units of its open holds; those holds are stale after the rebuild (they end without giving anything back),
   * so a count kept from them would refuse their users forever. The shard is paused while this runs. */
  async restoreUserCounts(shard: ShardRef, users: Map<string, number>): Promise<void> {
    const k = this.scripts.keys(shard);
    await this.redis.unlink(k.users);
    await inChunks([...users], ([user, held]) => this.redis.hset(k.users, user, Math.max(0, held)));
    await this.replicated(k.shard);
  }

  /** Claims "user|quantity" on the request's own shard (limited coupons), never replacing one; kept for a
   * window from now (at least what was left of the original's). */
  async restoreClaims(shard: ShardRef, claims: { requestId: string; value: string }[]): Promise<void> {
    await inChunks(claims, (c) => this.scripts.claimKeep(shard, c.requestId, c.value, true));
    if (claims.length > 0) await this.replicated(this.scripts.keys(shard).shard);
  }

  /** The open holds (Reserve, not yet confirmed, released or expired) of a shard whose request ids `wanted`
   * picks: they have no event and no
   * ledger row, so this is the only place a recovery learns who claimed their request ids. Read while the
   * coupon is paused, so no hold starts or ends meanwhile. */
  async openHolds(
    shard: ShardRef,
    wanted: (requestId: string) => boolean,
  ): Promise<{ requestId: string; userId: string; quantity: number }[]> {
    // Members are "<requestId>|<userId>" (ids never contain '|'); only the wanted ones' records are read.
    const ids = (await this.redis.zrange(this.scripts.keys(shard).holds, '0', '-1'))
      .map((m) => m.slice(0, m.indexOf('|')))
      .filter((id) => wanted(id));
    const out: { requestId: string; userId: string; quantity: number }[] = [];
    await inChunks(ids, async (requestId) => {
      const v = await recordValue(this.redis, this.scripts, shard, requestId);
      const h = v === null ? null : parseHold(v);
      if (h?.state === 'h') out.push({ requestId, userId: h.userId, quantity: h.quantity });
    });
    return out;
  }

  /** Whether a credit id was applied on a shard (a move whose units already landed at its target). */
  /** Forgets moves recorded on a shard whose hash was lost (its moves hash survived it): the recovery has
   * settled where their units are. The recovery holds the coupon's pause and lease, so nothing else acks or
   * lands these moves meanwhile (move-ack-2.lua and credit-2.lua refuse while paused). */
  async forgetMoves(shard: ShardRef, moveIds: string[]): Promise<void> {
    if (moveIds.length === 0) return;
    const k = this.scripts.keys(shard);
    await this.redis.hdel(k.moves, ...moveIds);
    await this.replicated(k.shard);
  }

  async landed(shard: ShardRef, creditId: string): Promise<boolean> {
    return (await this.redis.zscore(this.scripts.keys(shard).credits, creditId)) !== null;
  }

  private async replicated(key: string): Promise<void> {
    if (this.replicaAck) await this.replicaAck.afterWrite(key);
  }
}

/** Bounded concurrency: auto-pipelining batches what is in flight, without queueing 100k promises at once. */
async function inChunks<T>(items: T[], fn: (item: T) => Promise<unknown>, size = 2000): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}
