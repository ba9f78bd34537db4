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
import { luaScript } from './cluster.js';
import { HOLD_INDEX_PARTS, holdIndexKey } from './keys.js';
import { type Command, masterOf, sendOnMaster } from './master-pipeline.js';
import { redirectOf, sendFollowing } from './redirects.js';
import type { ReplicaAck, ReplicationTimeout } from './replica-ack.js';
import { type Reply, type ScriptCall, Scripts } from './scripts.js';

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

const scripts = new Map<string, ReturnType<typeof luaScript>>();
/** A hold script's text and SHA1, hashed once. */
function scriptOf(name: string): ReturnType<typeof luaScript> {
  let s = scripts.get(name);
  if (!s) {
    s = luaScript(name);
    scripts.set(name, s);
  }
  return s;
}

/** Replies the caller answers without the hold's state: nothing there, not yet there, or a refusal. */
const NO_RECORD = new Set(['not_found', 'missing', 'paused', 'conflict', 'too_many']);

export interface RedisHoldStoreOptions {
  namespace: string;
  idempotencyWindowS: number;
  replicaAck?: ReplicaAck | undefined;
  fence?: { assertOpen(key: string): void } | undefined;
}

export class RedisHoldStore implements HoldStore {
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: Cluster,
    private readonly options: RedisHoldStoreOptions,
  ) {
    this.scripts = new Scripts(redis, options.namespace, options.idempotencyWindowS);
  }

  async reserve(
    shard: ShardRef,
    input: DeductScriptInput & { ttlMs: number },
    credits: Credit[],
    creditEpoch = '',
  ): Promise<DeductScriptResult> {
    const key = this.scripts.keys(shard).shard;
    await this.index(shard);
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
    const sent = await this.send(this.scripts.keys(shard).shard, this.scripts.holdConfirmCall(shard, requestId, keep), {
      shard,
      requestId,
    });
    const r = sent.reply;
    if (r.kind === 'confirmed' || (r.kind === 'expired' && r.released > 0))
      return this.withRecord(r, shard, requestId, this.written(sent), sent);
    // An answer about an earlier write (a replay, a hold already released or expired) vouches for it.
    if (r.kind === 'replay' || r.kind === 'expired' || r.kind === 'released')
      return this.withRecord(r, shard, requestId, this.vouch(shard, sent.node), sent);
    return this.withRecord(r, shard, requestId, undefined, sent);
  }

  async release(shard: ShardRef, requestId: string): Promise<WithRecord<HoldReleaseReply>> {
    const sent = await this.send(this.scripts.keys(shard).shard, this.scripts.holdReleaseCall(shard, requestId), { shard, requestId });
    const r = sent.reply;
    if (r.kind === 'released' || (r.kind === 'expired' && r.released > 0))
      return this.withRecord(r, shard, requestId, this.written(sent), sent);
    if (r.kind === 'already_released' || r.kind === 'expired' || r.kind === 'confirmed')
      return this.withRecord(r, shard, requestId, this.vouch(shard, sent.node), sent);
    return this.withRecord(r, shard, requestId, undefined, sent);
  }

  async extend(shard: ShardRef, requestId: string, ttlMs: number): Promise<WithRecord<HoldExtendReply>> {
    const sent = await this.send(this.scripts.keys(shard).shard, this.scripts.holdExtendCall(shard, requestId, ttlMs), {
      shard,
      requestId,
    });
    const r = sent.reply;
    return this.withRecord(r, shard, requestId, r.kind === 'extended' ? this.written(sent) : undefined, sent);
  }

  /** Hold script calls answered; sends that met a redirect (the slot map was stale, or the slot is moving); and
   * sends again as EVAL (the node had not cached the script: restarted, flushed, or a promoted replica). */
  readonly sent = { calls: 0, redirected: 0, loaded: 0 };

  /**
   * A hold script on its shard's master's own connection, in one write with (`read`) the three HGETs and the
   * EXISTS that read the hold's record after it, and at the `replica` level the WAIT: one round trip for what
   * the cluster client sent as three commands in two or three round trips, each through a pipeline of its own.
   * Redirects, TRYAGAIN and closed connections are followed as the group commit follows them (sendFollowing):
   * every hold script is safe to send again, a Reserve replaying by its request id, a Confirm or Release
   * answering the state it left, an Extend setting the same expiry again.
   */
  private async send<T>(key: string, call: ScriptCall<T>, read?: { shard: ShardRef; requestId: string }): Promise<OneWrite<T>> {
    const script = scriptOf(call.name);
    const reads: Command[] = [];
    if (read) {
      const { keys, field } = this.scripts.recordPlaces(read.shard, read.requestId);
      for (const k of keys) reads.push(['hget', k, field]);
      reads.push(['exists', key]);
    }
    let done: Omit<OneWrite<T>, 'reply'> | undefined;
    const reply = await sendFollowing<unknown>(undefined, {
      owner: () => {
        this.options.fence?.assertOpen(key);
        return masterOf(this.redis, key);
      },
      refresh: () => void this.redis.refreshSlotsCache(),
      send: async (node, asking) => {
        let out = await this.oneWrite(node, asking, ['evalsha', script.sha, script.numberOfKeys, ...call.args], reads);
        const refused = out?.results[0]?.[0];
        if (refused?.message.startsWith('NOSCRIPT')) {
          // Not run: sent again with its text, which also caches it on the node for the next call.
          this.sent.loaded++;
          out = await this.oneWrite(node, asking, ['eval', script.lua, script.numberOfKeys, ...call.args], reads);
        }
        if (!out) return undefined;
        const [err, value] = out.results[0]!;
        if (redirectOf(err)) this.sent.redirected++;
        if (!err) done = { node, ack: out.ack, record: recordOf(out.results.slice(1)) };
        return [err, value];
      },
    });
    this.sent.calls++;
    return { reply: call.parse(reply as Reply), ...done! };
  }

  /** `script` then (unless `asking`: an ASK covers only the command after ASKING) `reads`, and at the `replica`
   * level the WAIT, in one write on `node`'s connection: the script's reply first, each read's after it.
   * Undefined when `node` has no ready connection. */
  private async oneWrite(
    node: string,
    asking: boolean,
    script: Command,
    reads: Command[],
  ): Promise<{ results: [Error | null, unknown][]; ack: ReplicationTimeout | null } | undefined> {
    const commands = asking ? [['asking'], script] : [script, ...reads];
    const ack = this.options.replicaAck;
    let out: { results: [Error | null, unknown][]; ack: ReplicationTimeout | null } | undefined;
    if (ack) out = await ack.pipelineWithWait(node, commands);
    else {
      const results = await sendOnMaster(this.redis, node, commands);
      out = results && { results, ack: null };
    }
    return out && asking ? { results: out.results.slice(1), ack: out.ack } : out;
  }

  /** Throws when the WAIT of the script's write said it did not reach enough replicas (null at `leader` level). */
  private async written(sent: OneWrite<unknown>): Promise<void> {
    if (sent.ack) throw sent.ack;
  }

  /** Puts the shard in the index sweepers visit (see the top of this file). */
  private async index(shard: ShardRef): Promise<void> {
    await this.redis.sadd(holdIndexKey(this.options.namespace, indexPart(shard.tag)), indexMember(shard));
  }

  /** The reply with the hold's record, read after the script and beside its ack (`acked`): the caller answers
   * with the hold's state, and waiting for the ack before asking for it cost a round trip more. The read sees
   * the script's write (it follows its reply) or anything later, as a read after the ack would. */
  private async withRecord<R extends { kind: string }>(
    r: R,
    shard: ShardRef,
    requestId: string,
    acked: Promise<void> | undefined,
    sent: OneWrite<unknown> | undefined,
  ): Promise<WithRecord<R>> {
    if (NO_RECORD.has(r.kind)) {
      await acked;
      return r;
    }
    const [, record] = await Promise.all([acked, sent?.record !== undefined ? sent.record : this.read(shard, requestId)]);
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
function recordOf(reads: [Error | null, unknown][]): HoldRead | undefined {
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
