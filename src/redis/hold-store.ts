// HoldStore on Redis Cluster over the hold scripts in scripts.ts (lua/hold-*.lua): the failover fence before a
// write and the replica ack after it, as stock-store.ts does for Deduct; plus the index of shards with open
// holds that every instance's sweeper walks (src/domain/hold-sweeper.ts).
//
// The index: a few sets (keys.ts holdIndexKey) of "<couponId>|<index>|<tag>". A Reserve adds its shard before
// and after its script; a sweeper removes a shard it found without holds, then looks again and puts it back if
// a hold appeared meanwhile. A hold's script always runs before its Reserve's second add, so a removal can
// never hide a hold that is in Redis: either the second look sees it, or the add comes after the removal.
import type { Cluster } from 'ioredis';
import type {
  Credit,
  DeductScriptInput,
  DeductScriptResult,
  HoldConfirmReply,
  HoldExtendReply,
  HoldRead,
  HoldRecord,
  HoldReleaseReply,
  HoldStore,
  ShardRef,
  WithRecord,
} from '../domain/ports.js';
import { HOLD_INDEX_PARTS, holdIndexKey } from './keys.js';
import { type Command, masterOf } from './master-pipeline.js';
import { OneWriteSender } from './one-write.js';
import type { ReplicaAck, ReplicationTimeout } from './replica-ack.js';
import { type ScriptCall, Scripts } from './scripts.js';
import type { ShardBatcher } from './shard-batcher.js';

const CREDIT_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** A hold call sent in one write (send): the script's reply, the hold's record read right after it (undefined
 * when not asked for or not read), and the WAIT's verdict (null: acknowledged, or no WAIT). */
interface OneWrite<T> {
  reply: T;
  /** The master that ran the script. */
  node: string;
  record: HoldRead | undefined;
  ack: ReplicationTimeout | null;
}

/** Replies the caller answers without the hold's state: nothing there, not yet there, or a refusal. */
const NO_RECORD = new Set(['not_found', 'missing', 'paused', 'conflict', 'too_many']);

export interface RedisHoldStoreOptions {
  namespace: string;
  idempotencyWindowS: number;
  replicaAck?: ReplicaAck | undefined;
  fence?: { assertOpen(key: string): void } | undefined;
  /** Group commit (RedisStockStore.reserveBatcher): Reserves without fallback credits share their shard's call
   * with the Deducts and Compensates bound for it, and its fence and replica ack. Absent: one call each. */
  batch?: Pick<ShardBatcher, 'reserve'> | undefined;
}

export class RedisHoldStore implements HoldStore {
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: Cluster,
    private readonly options: RedisHoldStoreOptions,
  ) {
    this.scripts = new Scripts(redis, options.namespace, options.idempotencyWindowS);
    this.sender = new OneWriteSender(redis, options);
    this.sent = this.sender.sent;
  }

  private readonly sender: OneWriteSender;
  /** Hold script calls answered, sends that met a redirect, sends again as EVAL (one-write.ts). */
  readonly sent: OneWriteSender['sent'];

  async reserve(
    shard: ShardRef,
    input: DeductScriptInput & { ttlMs: number },
    credits: Credit[],
    creditEpoch = '',
    signal?: AbortSignal,
  ): Promise<DeductScriptResult> {
    const key = this.scripts.keys(shard).shard;
    await this.index(shard);
    if (this.options.batch && credits.length === 0) {
      // The batch's own fence and replica ack stand for this request's (shard-batcher.ts answer): a write or
      // a replay whose ack failed is rejected with that failure.
      const r = await this.options.batch.reserve(shard, input, signal);
      if (r.kind === 'deducted') await this.index(shard);
      return r;
    }
    const sent = await this.send(key, this.scripts.holdReserveCall(shard, input, credits, creditEpoch, CREDIT_RETENTION_MS));
    const r = sent.reply;
    // A hold answered at `replica` level survives a failover: the WAIT covers it like a deduction. The second
    // index add only has to follow the script.
    if (r.kind === 'deducted') await Promise.all([this.written(sent), this.index(shard)]);
    else if (credits.length > 0) await this.written(sent);
    // A replay vouches for the original write, which may not have reached a replica when it was answered.
    else if (r.kind === 'replay') await this.vouch(shard, sent.node);
    return r;
  }

  async read(shard: ShardRef, requestId: string): Promise<HoldRead> {
    const v = await recordValue(this.redis, this.scripts, shard, requestId);
    if (v !== null) return holdReadOf(v, 1);
    // No hold found: on a shard whose master lost its data, "none" would be a guess.
    return holdReadOf(null, await this.redis.exists(this.scripts.keys(shard).shard));
  }

  async confirm(shard: ShardRef, requestId: string, keep: number): Promise<WithRecord<HoldConfirmReply>> {
    const read = { shard, requestId };
    const sent = await this.send(this.scripts.keys(shard).shard, this.scripts.holdConfirmCall(shard, requestId, keep), read);
    const r = sent.reply;
    // An answer about an earlier write (a replay, a hold already released or expired) vouches for it.
    const ack =
      r.kind === 'confirmed' || (r.kind === 'expired' && r.released > 0)
        ? 'wrote'
        : r.kind === 'replay' || r.kind === 'expired' || r.kind === 'released'
          ? 'vouch'
          : 'none';
    return this.answered(sent, read, ack);
  }

  async release(shard: ShardRef, requestId: string): Promise<WithRecord<HoldReleaseReply>> {
    const read = { shard, requestId };
    const sent = await this.send(this.scripts.keys(shard).shard, this.scripts.holdReleaseCall(shard, requestId), read);
    const r = sent.reply;
    const ack =
      r.kind === 'released' || (r.kind === 'expired' && r.released > 0)
        ? 'wrote'
        : r.kind === 'already_released' || r.kind === 'expired' || r.kind === 'confirmed'
          ? 'vouch'
          : 'none';
    return this.answered(sent, read, ack);
  }

  async extend(shard: ShardRef, requestId: string, ttlMs: number): Promise<WithRecord<HoldExtendReply>> {
    const read = { shard, requestId };
    const sent = await this.send(this.scripts.keys(shard).shard, this.scripts.holdExtendCall(shard, requestId, ttlMs), read);
    return this.answered(sent, read, sent.reply.kind === 'extended' ? 'wrote' : 'none');
  }

  /** The hold script, and for Confirm, Release and ExtendHold the reads of the hold's record after it, in one
   * write (one-write.ts); the record from those reads, or undefined when they were not sent or one failed (the
   * slot moved right after the script: it is read again then). */
  private async send<T>(key: string, call: ScriptCall<T>, read?: { shard: ShardRef; requestId: string }): Promise<OneWrite<T>> {
    const reads: Command[] = [];
    if (read) {
      const { keys, field } = this.scripts.recordPlaces(read.shard, read.requestId);
      for (const k of keys) reads.push(['hget', k, field]);
      reads.push(['exists', key]);
    }
    const w = await this.sender.send(key, call, reads);
    return { reply: w.reply, node: w.node, ack: w.ack, record: read ? recordOf(w.reads) : undefined };
  }

  /** Throws when the WAIT of the script's write said it did not reach enough replicas (null at `leader` level). */
  private async written(sent: OneWrite<unknown>): Promise<void> {
    if (sent.ack) throw sent.ack;
  }

  /** Puts the shard in the index sweepers visit (see the top of this file). */
  private async index(shard: ShardRef): Promise<void> {
    await this.redis.sadd(holdIndexKey(this.options.namespace, indexPart(shard.tag)), indexMember(shard));
  }

  /**
   * The reply with the hold's record as read in the script's own write (read again when that read could not be
   * used), once the ack the answer needs is in: the script's own WAIT (`wrote`), a vouch for the earlier write
   * the answer is about (`vouch`), or none. The read sees the script's write (it follows it) or anything later,
   * as a read after the ack would.
   */
  private async answered<R extends { kind: string }>(
    sent: OneWrite<R>,
    { shard, requestId }: { shard: ShardRef; requestId: string },
    ack: 'wrote' | 'vouch' | 'none',
  ): Promise<WithRecord<R>> {
    const r = sent.reply;
    const acked = ack === 'wrote' ? this.written(sent) : ack === 'vouch' ? this.vouch(shard, sent.node) : undefined;
    if (NO_RECORD.has(r.kind)) {
      await acked;
      return r;
    }
    const [, record] = await Promise.all([acked, sent.record !== undefined ? sent.record : this.read(shard, requestId)]);
    return { ...r, record };
  }

  // ---- for the sweeper ----

  /** Every shard in the index (each part read once). */
  async indexed(): Promise<ShardRef[]> {
    const parts = await Promise.all(
      Array.from({ length: HOLD_INDEX_PARTS }, (_, i) => this.redis.smembers(holdIndexKey(this.options.namespace, i))),
    );
    const out: ShardRef[] = [];
    for (const members of parts)
      for (const m of members) {
        const ref = parseIndexMember(m);
        if (ref) out.push(ref);
      }
    return out;
  }

  due(shard: ShardRef, limit: number): Promise<{ open: number; due: string[] }> {
    return this.scripts.holdDue(shard, limit);
  }

  async expire(shard: ShardRef, member: string): Promise<number | 'missing' | 'paused'> {
    const key = this.scripts.keys(shard).shard;
    const owner = this.options.replicaAck?.owner(key);
    const r = await this.scripts.holdExpire(shard, member);
    // Not fenced: an expiry lost in a failover is found due again and expired again (it is idempotent).
    if (typeof r === 'number' && r > 0) await this.replicated(key, owner).catch(() => {});
    return r;
  }

  /** Drops a shard found without holds from the index, then looks again (see the top of this file). */
  async unindexIfEmpty(shard: ShardRef): Promise<void> {
    const key = holdIndexKey(this.options.namespace, indexPart(shard.tag));
    const member = indexMember(shard);
    await this.redis.srem(key, member);
    if ((await this.redis.zcard(this.scripts.keys(shard).holds)) > 0) await this.redis.sadd(key, member);
  }

  /** Backstop for an index entry lost with a crash between a Reserve's script and its add: every shard of
   * the given coupons whose holds set is not empty goes (back) into the index. The sets are counted with one
   * holds-open-1.lua call per master (a pass over 10,000 coupons was 40,000 ZCARDs every 30 s, ~3% of a core
   * of client work with no hold anywhere); a set its master no longer serves, or a call that fails, is
   * counted on its own through the cluster client. */
  async reindex(shards: ShardRef[]): Promise<number> {
    const byMaster = Map.groupBy(shards, (s) => masterOf(this.redis, this.scripts.keys(s).holds));
    // No master known for the slot: the cluster client routes (or refuses) each on its own.
    const alone = byMaster.get(undefined) ?? [];
    byMaster.delete(undefined);
    const open: ShardRef[] = [];
    await Promise.all(
      [...byMaster.values()].map(async (group) => {
        let counts: number[];
        try {
          counts = await this.scripts.holdsOpen(group);
        } catch {
          alone.push(...group);
          return;
        }
        group.forEach((s, i) => {
          if (counts[i]! > 0) open.push(s);
          else if (counts[i]! < 0) alone.push(s);
        });
      }),
    );
    await Promise.all(
      alone.map(async (s) => {
        if ((await this.redis.zcard(this.scripts.keys(s).holds)) > 0) open.push(s);
      }),
    );
    // Summed after the awaits: `added += await …` in each would read `added` before its await, and the
    // concurrent adds would overwrite each other's counts.
    const adds = await Promise.all(
      open.map((s) => this.redis.sadd(holdIndexKey(this.options.namespace, indexPart(s.tag)), indexMember(s))),
    );
    return adds.reduce((sum, n) => sum + n, 0);
  }

  /** As stock-store.ts: a tiny write in the slot, on the connection the WAIT goes out on, orders after the
   * write vouched for in the master's replication stream. */
  private async vouch(shard: ShardRef, owner: string | undefined): Promise<void> {
    if (!this.options.replicaAck) return;
    const k = this.scripts.keys(shard);
    this.options.fence?.assertOpen(k.ack);
    await this.redis.set(k.ack, Date.now(), 'EX', this.options.idempotencyWindowS);
    await this.replicated(k.shard, owner);
  }

  private async replicated(key: string, ownerBefore: string | undefined): Promise<void> {
    if (this.options.replicaAck) await this.options.replicaAck.afterWrite(key, ownerBefore);
  }
}

/** The record of `requestId` on the shard as stored (a hold's or a deduction's), or null: the first of its three
 * bucket hashes that holds it. The hashes share the shard's slot, so asked together they leave in one write and
 * cost one round trip instead of up to three in a row. */
export async function recordValue(redis: Cluster, scripts: Scripts, shard: ShardRef, requestId: string): Promise<string | null> {
  const { keys, field } = scripts.recordPlaces(shard, requestId);
  const values = await Promise.all(keys.map((key) => redis.hget(key, field as string)));
  return values.find((v) => v !== null) ?? null;
}

/** The hold's record from the replies of the three HGETs and the EXISTS after its script; undefined when they
 * were not sent (an ASK) or one failed (the slot moved right after the script): it is read again then. */
function recordOf(reads: readonly [Error | null, unknown][]): HoldRead | undefined {
  if (reads.length !== 4 || reads.some(([e]) => e)) return undefined;
  const value = reads.slice(0, 3).find(([, v]) => v !== null)?.[1] as string | undefined;
  return holdReadOf(value ?? null, reads[3]![1] as number);
}

/** What a record read found: the first value of the three bucket hashes (null: none), and whether the shard
 * hash exists (EXISTS: 0 or 1), which tells 'none recorded' from 'lost with its master's data'. */
function holdReadOf(value: string | null, shardExists: number): HoldRead {
  if (value !== null) return parseHold(value) ?? 'deduction';
  return shardExists === 0 ? 'missing' : null;
}

/** A record hash value as a hold (lua/includes/hold-record.lua), or a confirmed hold (a deduction's record
 * "q|r|t|flags|u" flagged 'h'); null for a Deduct's record. */
export function parseHold(v: string): HoldRecord | null {
  if (v.startsWith('h')) {
    const [head, hq, e, , , r, , ...user] = v.split('|');
    const st = head!.slice(1) as 'h' | 'r' | 'x';
    return { userId: user.join('|'), quantity: Number(hq), confirmed: 0, state: st, expiresAtMs: Number(e), remaining: Number(r) };
  }
  const [q, r, , flags, ...user] = v.split('|');
  if (!flags?.includes('h')) return null;
  // A confirmed hold keeps only what a deduction's record keeps: the units confirmed.
  return { userId: user.join('|'), quantity: Number(q), confirmed: Number(q), state: 'c', expiresAtMs: 0, remaining: Number(r) };
}

function indexMember(s: ShardRef): string {
  return `${s.couponId}|${s.index}|${s.tag}`;
}

function parseIndexMember(m: string): ShardRef | null {
  const a = m.indexOf('|');
  const b = m.indexOf('|', a + 1);
  if (a <= 0 || b <= a) return null;
  return { couponId: m.slice(0, a), index: Number(m.slice(a + 1, b)), tag: m.slice(b + 1) };
}

function indexPart(tag: string): number {
  let h = 0;
  for (let i = 0; i < tag.length; i++) h = (h * 31 + tag.charCodeAt(i)) | 0;
  return Math.abs(h) % HOLD_INDEX_PARTS;
}
