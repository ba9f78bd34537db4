// Every caller of a Lua script under lua/, in one place (as BullMQ's Scripts class holds all of its own): each
// method builds the script's KEYS from keys.ts, its ARGV in the order the script's header names them, and
// turns the reply's return codes into a typed result. The stores around it (stock-store.ts,
// recovery-store.ts, settlement's refusal-store.ts) keep their domain-facing roles — replica acks, the
// failover fence — and call these; nothing else calls a script.
import type { Cluster } from 'ioredis';
import type {
  CompensateScriptResult,
  Credit,
  CreditResult,
  DeductScriptInput,
  DeductScriptResult,
  HoldConfirmReply,
  HoldExtendReply,
  HoldReleaseReply,
  ShardRef,
} from '../domain/ports.js';
import type { LiveShard } from '../recovery/recovery-plan.js';
import { luaScript } from './cluster.js';
import { firstBucket, orderKey, RELAY_GROUP, recordField, shardKeys, type ShardKeys } from './keys.js';
import { type RequestRecord, unpackHoldValue, unpackRecord } from './request-record.js';
import { transitUnits } from './shard-level.js';

export type Arg = string | number | Buffer;
type ScriptFn = (...args: Arg[]) => Promise<unknown>;
export type Reply = (string | number | null)[];

export type PauseResult = { kind: 'paused'; shard: LiveShard } | { kind: 'missing' } | { kind: 'busy'; waitMs: number } | { kind: 'lost' };

/** What claim-4.lua and claim-read-4.lua answer: the claim's value, null when unclaimed, 'missing' when the
 * shard holding the claims is gone. */
export type ClaimReply = string | null | 'missing';

/** What refuse-mark-3.lua did: marked; marked, but a Compensate before the mark had put the units back on sale;
 * or nothing, the record being gone (expired or lost). */
export type RefuseMarkResult = 'marked' | 'given_back' | 'gone';

/** One request record to put back (record-restore-3.lua). */
export interface RecordToRestore {
  requestId: string;
  userId: string;
  quantity: number;
  occurredAt: number;
  compensated: boolean;
  /** Settlement refused it (record flag x): a Compensate gives nothing back for it. */
  refused?: boolean;
  /** It confirmed a hold (record flag h): its request id is a Reserve's, as before the loss. */
  hold?: boolean;
}

/** A script refused because this instance's clock is more than half an idempotency window off Redis's: it
 * would have named the wrong bucket hashes (lua/includes/buckets.lua). */
function clockSkew(): Error {
  return new Error("this instance's clock is more than half an idempotency window off the Redis server's: fix its time sync");
}

const isDigit = (c: number) => c >= 48 && c <= 57;

const NODE_READ = luaScript('nodeRead');
/** shard-batch-8.lua's keys and its 6 values before the requests: one shard's head in node-batch-1.lua. */
const SHARD_HEAD = luaScript('shardBatch').numberOfKeys + 6;

/** One shard's record reads: a record or null per request id, 'missing' when the shard hash is gone, an Error
 * when the script refused. */
export type NodeReadAnswer = (RequestRecord | null)[] | 'missing' | 'elsewhere' | Error;

/** A code and `n` packed records from `reply[at]` on (record-read-4.lua's reply, one shard of node-read-1.lua's). */
function readRecords(reply: Reply, at: number, n: number): (RequestRecord | null)[] | 'missing' | Error {
  const code = Number(reply[at]);
  if (code === -4) return 'missing';
  if (code === -8) return clockSkew();
  if (code !== 1) return new Error(`record read answered ${String(reply[at])}`);
  const out: (RequestRecord | null)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const packed = String(reply[at + 1 + i] ?? '');
    // A hold's value (starting with 'h', lua/includes/hold-record.lua) is no deduction's record, but it
    // says the id is a Reserve's.
    out[i] = isDigit(packed.charCodeAt(0)) ? unpackRecord(packed) : packed.startsWith('h') ? unpackHoldValue(packed) : null;
  }
  return out;
}

/** One request of a group commit (shard-batch-8.lua). */
export type BatchOp =
  | { op: 'D'; input: DeductScriptInput }
  | { op: 'C'; requestId: string; reason: string; limited: boolean }
  | { op: 'R'; input: DeductScriptInput & { ttlMs: number } };

/** Each request's own answer: what deduct-7.lua, compensate-6.lua or hold-reserve-7.lua would have answered,
 * or its own error. */
export type BatchReply = DeductScriptResult | CompensateScriptResult | Error;

/** shard-batch-8.lua's flat reply (three values per request), one result or error per request. */
export function parseShardBatch(ops: readonly BatchOp[], flat: Reply): BatchReply[] {
  return ops.map((o, i) => {
    if (flat.length < 3 * i + 3) return new Error(`shard-batch-8.lua returned no reply for request ${i}`);
    const r = flat.slice(3 * i, 3 * i + 3);
    if (Number(r[0]) === -9) return new Error(`shard-batch-8.lua: ${String(r[1])}`);
    try {
      return o.op === 'D' ? parseDeduct(r) : o.op === 'C' ? parseCompensate(r) : parseHoldReserve(r);
    } catch (err) {
      return err as Error;
    }
  });
}

/** The registered script function (defineCommand in cluster.ts), looked up once. */
/** A script's call built apart from its sending: `name` and `args` (its keys, then its values) are what the
 * registered command takes, and what EVALSHA takes after the script's SHA1 and key count; a caller that sends
 * the script in one write on its master's connection (one-write.ts) parses the reply with `parse`. */
export interface ScriptCall<T> {
  name: 'holdReserve' | 'holdConfirm' | 'holdRelease' | 'holdExtend' | 'orderOpen' | 'orderMove';
  args: Arg[];
  parse(r: Reply): T;
}

function parseHoldReserve(r: Reply): DeductScriptResult {
  if (Number(r[0]) === 1) return { kind: 'deducted', remaining: Number(r[1]), expiresAtMs: Number(r[2]) };
  if (Number(r[0]) === 2) return { kind: 'replay', remaining: Number(r[1]), compensated: false };
  return parseDeduct(r);
}

function parseHoldConfirm(r: Reply): HoldConfirmReply {
  const code = Number(r[0]);
  if (code === 1) return { kind: 'confirmed', kept: Number(r[1]), released: Number(r[2]) };
  if (code === 2) return { kind: 'replay', kept: Number(r[1]), released: 0 };
  if (code === 3) return { kind: 'not_found' };
  if (code === 4) return { kind: 'released' };
  if (code === 5) return { kind: 'expired', released: Number(r[1]) };
  if (code === -3) return { kind: 'conflict', recorded: Number(r[1]) };
  if (code === -4) return { kind: 'missing' };
  if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
  if (code === -6) return { kind: 'too_many', held: Number(r[1]) };
  throw new Error(`hold-confirm-7.lua returned unknown code ${code}`);
}

function parseHoldRelease(r: Reply): HoldReleaseReply {
  const code = Number(r[0]);
  if (code === 1) return { kind: 'released', released: Number(r[1]) };
  if (code === 2) return { kind: 'already_released' };
  if (code === 3) return { kind: 'not_found' };
  if (code === 4) return { kind: 'confirmed' };
  if (code === 5) return { kind: 'expired', released: Number(r[1]) };
  if (code === -4) return { kind: 'missing' };
  if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
  throw new Error(`hold-release-6.lua returned unknown code ${code}`);
}

function parseHoldExtend(r: Reply): HoldExtendReply {
  const code = Number(r[0]);
  if (code === 1) return { kind: 'extended', expiresAtMs: Number(r[1]) };
  if (code === 3) return { kind: 'not_found' };
  if (code === 4) return { kind: 'confirmed' };
  if (code === 5) return { kind: 'expired' };
  if (code === 6) return { kind: 'released' };
  if (code === -4) return { kind: 'missing' };
  if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
  throw new Error(`hold-extend-5.lua returned unknown code ${code}`);
}

function scriptFn(cluster: Cluster, name: string): ScriptFn {
  const fn = (cluster as unknown as Record<string, ScriptFn | undefined>)[name];
  if (typeof fn !== 'function') throw new Error(`Lua script ${name} is not registered`);
  return fn.bind(cluster);
}

export class Scripts {
  private readonly keyCache = new Map<string, ShardKeys>();
  private readonly fn: {
    shardInit: ScriptFn;
    deduct: ScriptFn;
    compensate: ScriptFn;
    moveOut: ScriptFn;
    moveAck: ScriptFn;
    credit: ScriptFn;
    claim: ScriptFn;
    claimRead: ScriptFn;
    claimKeep: ScriptFn;
    recordRead: ScriptFn;
    legacyFold: ScriptFn;
    shardBatch: ScriptFn;
    shardPause: ScriptFn;
    shardResume: ScriptFn;
    shardAdjust: ScriptFn;
    shardRebuild: ScriptFn;
    recordRestore: ScriptFn;
    refuseMark: ScriptFn;
    holdExpire: ScriptFn;
    holdDue: ScriptFn;
    holdsOpen: ScriptFn;
    outboxProbe: ScriptFn;
  };

  /** windowS: the idempotency window, also the width of the record and claim buckets (keys.ts): every
   * instance must use the same one. */
  constructor(
    redis: Cluster,
    private readonly namespace: string,
    private readonly windowS: number,
    /** This instance's clock (tests skew it): names the bucket hashes and stamps records. */
    private readonly clock: () => number = Date.now,
  ) {
    this.fn = {
      shardInit: scriptFn(redis, 'shardInit'),
      deduct: scriptFn(redis, 'deduct'),
      compensate: scriptFn(redis, 'compensate'),
      moveOut: scriptFn(redis, 'moveOut'),
      moveAck: scriptFn(redis, 'moveAck'),
      credit: scriptFn(redis, 'credit'),
      claim: scriptFn(redis, 'claim'),
      claimRead: scriptFn(redis, 'claimRead'),
      claimKeep: scriptFn(redis, 'claimKeep'),
      recordRead: scriptFn(redis, 'recordRead'),
      legacyFold: scriptFn(redis, 'legacyFold'),
      shardBatch: scriptFn(redis, 'shardBatch'),
      shardPause: scriptFn(redis, 'shardPause'),
      shardResume: scriptFn(redis, 'shardResume'),
      shardAdjust: scriptFn(redis, 'shardAdjust'),
      shardRebuild: scriptFn(redis, 'shardRebuild'),
      recordRestore: scriptFn(redis, 'recordRestore'),
      refuseMark: scriptFn(redis, 'refuseMark'),
      holdExpire: scriptFn(redis, 'holdExpire'),
      holdDue: scriptFn(redis, 'holdDue'),
      holdsOpen: scriptFn(redis, 'holdsOpen'),
      outboxProbe: scriptFn(redis, 'outboxProbe'),
    };
  }

  /** One shard's keys, built once per tag (the hot path asks for them on every call). */
  keys(shard: ShardRef): ShardKeys {
    let k = this.keyCache.get(shard.tag);
    if (!k) {
      k = shardKeys(this.namespace, shard.tag);
      if (this.keyCache.size > 100_000) this.keyCache.clear();
      this.keyCache.set(shard.tag, k);
    }
    return k;
  }

  /** shard-init-2.lua: true when created, false when the shard existed. */
  async shardInit(shard: ShardRef, available: number, net: number): Promise<boolean> {
    const k = this.keys(shard);
    return (await this.fn.shardInit(k.shard, k.outbox, available, RELAY_GROUP, net)) === 1;
  }

  /** The three record (or claim) hashes a call passes, from this instance's clock (lua/includes/buckets.lua). */
  private buckets(k: ShardKeys, of: 'records' | 'claims', now: number): [string, string, string, number] {
    const first = firstBucket(now, this.windowS);
    return [k[of](first), k[of](first + 1), k[of](first + 2), first];
  }

  /** deduct-7.lua. */
  async deduct(
    shard: ShardRef,
    input: DeductScriptInput,
    credits: readonly Credit[],
    creditEpoch: string,
    creditRetentionMs: number,
  ): Promise<DeductScriptResult> {
    const k = this.keys(shard);
    const now = this.clock();
    const [r0, r1, r2, first] = this.buckets(k, 'records', now);
    const args: Arg[] = [
      k.shard,
      r0,
      r1,
      r2,
      k.users,
      k.outbox,
      k.credits,
      input.requestId,
      recordField(input.requestId),
      input.userId,
      input.quantity,
      input.perUserLimit,
      this.windowS,
      first,
      shard.index,
      shard.couponId,
      now,
      creditRetentionMs,
      creditEpoch,
    ];
    for (const c of credits) args.push(c.id, c.quantity);
    return parseDeduct((await this.fn.deduct(...args)) as Reply);
  }

  /** shard-batch-8.lua: the requests in order, one reply each. vouch: touch the ack key when a reply vouches
   * for an earlier write (`replica` ack level). */
  async shardBatch(shard: ShardRef, ops: readonly BatchOp[], vouch: boolean): Promise<BatchReply[]> {
    return parseShardBatch(ops, (await this.fn.shardBatch(...this.shardBatchArgs(shard, ops, vouch))) as Reply);
  }

  /** shard-batch-8.lua's keys and arguments, for a caller that sends it itself (shard-batcher.ts, beside a
   * WAIT); parseShardBatch reads its reply. */
  shardBatchArgs(shard: ShardRef, ops: readonly BatchOp[], vouch: boolean): Arg[] {
    const k = this.keys(shard);
    const now = this.clock();
    const [r0, r1, r2, first] = this.buckets(k, 'records', now);
    const args: Arg[] = [
      k.shard,
      r0,
      r1,
      r2,
      k.users,
      k.outbox,
      k.ack,
      k.holds,
      this.windowS,
      first,
      shard.couponId,
      shard.index,
      now,
      vouch ? 1 : 0,
    ];
    for (const o of ops) {
      if (o.op === 'D') {
        const i = o.input;
        args.push('D', i.requestId, recordField(i.requestId), i.userId, i.quantity, i.perUserLimit);
      } else if (o.op === 'C') {
        args.push('C', o.requestId, recordField(o.requestId), '', o.reason, o.limited ? 1 : 0);
      } else {
        const i = o.input;
        args.push(`R${i.ttlMs}`, i.requestId, recordField(i.requestId), i.userId, i.quantity, i.perUserLimit);
      }
    }
    return args;
  }

  /** node-batch-1.lua's arguments after its one key (the first shard's hash): each shard's shard-batch-8.lua
   * keys and values, its request count, then its requests. */
  nodeBatchArgs(batches: readonly { shard: ShardRef; ops: readonly BatchOp[] }[], vouch: boolean): Arg[] {
    const args: Arg[] = [];
    for (const b of batches) {
      const shardArgs = this.shardBatchArgs(b.shard, b.ops, vouch);
      for (let i = 0; i < SHARD_HEAD; i++) args.push(shardArgs[i]!);
      args.push(b.ops.length);
      for (let i = SHARD_HEAD; i < shardArgs.length; i++) args.push(shardArgs[i]!);
    }
    return args;
  }

  /** hold-reserve-7.lua: the same results as deduct-7.lua; a new hold carries its expiry. A replay of a hold
   * is 'replay' (its state is read with HoldStore.read). */
  holdReserveCall(
    shard: ShardRef,
    input: DeductScriptInput & { ttlMs: number },
    credits: readonly Credit[],
    creditEpoch: string,
    creditRetentionMs: number,
  ): ScriptCall<DeductScriptResult> {
    const k = this.keys(shard);
    const now = this.clock();
    const [r0, r1, r2, first] = this.buckets(k, 'records', now);
    const args: Arg[] = [
      k.shard,
      r0,
      r1,
      r2,
      k.users,
      k.credits,
      k.holds,
      input.requestId,
      recordField(input.requestId),
      input.userId,
      input.quantity,
      input.perUserLimit,
      this.windowS,
      first,
      shard.index,
      input.ttlMs,
      now,
      creditRetentionMs,
      creditEpoch,
    ];
    for (const c of credits) args.push(c.id, c.quantity);
    return { name: 'holdReserve', args, parse: parseHoldReserve };
  }

  /** hold-confirm-7.lua. */
  holdConfirmCall(shard: ShardRef, requestId: string, keep: number): ScriptCall<HoldConfirmReply> {
    const k = this.keys(shard);
    const now = this.clock();
    const [r0, r1, r2] = this.buckets(k, 'records', now);
    const args = [
      k.shard,
      r0,
      r1,
      r2,
      k.users,
      k.outbox,
      k.holds,
      requestId,
      recordField(requestId),
      keep,
      shard.couponId,
      shard.index,
      now,
    ];
    return { name: 'holdConfirm', args, parse: parseHoldConfirm };
  }

  /** hold-release-6.lua. */
  holdReleaseCall(shard: ShardRef, requestId: string): ScriptCall<HoldReleaseReply> {
    const k = this.keys(shard);
    const [r0, r1, r2] = this.buckets(k, 'records', this.clock());
    return {
      name: 'holdRelease',
      args: [k.shard, r0, r1, r2, k.users, k.holds, requestId, recordField(requestId)],
      parse: parseHoldRelease,
    };
  }

  /** hold-extend-5.lua. */
  holdExtendCall(shard: ShardRef, requestId: string, ttlMs: number): ScriptCall<HoldExtendReply> {
    const k = this.keys(shard);
    const [r0, r1, r2] = this.buckets(k, 'records', this.clock());
    const args = [k.shard, r0, r1, r2, k.holds, requestId, recordField(requestId), ttlMs, this.windowS];
    return { name: 'holdExtend', args, parse: parseHoldExtend };
  }

  /** hold-due-1.lua: open holds on the shard, and up to `limit` due ones ("<requestId>|<userId>"). */
  async holdDue(shard: ShardRef, limit: number): Promise<{ open: number; due: string[] }> {
    const r = (await this.fn.holdDue(this.keys(shard).holds, limit)) as Reply;
    return { open: Number(r[0]), due: r.slice(1).map(String) };
  }

  /** holds-open-1.lua: each shard's open holds, all expected on the master serving the first; -1 for a shard
   * whose slot that master does not serve. */
  async holdsOpen(shards: readonly ShardRef[]): Promise<number[]> {
    const sets = shards.map((s) => this.keys(s).holds);
    const r = (await this.fn.holdsOpen(sets[0]!, ...sets)) as Reply;
    if (!Array.isArray(r) || r.length !== sets.length)
      throw new Error(`holds-open-1.lua answered ${Array.isArray(r) ? r.length : typeof r} for ${sets.length} sets`);
    return r.map(Number);
  }

  /** hold-expire-6.lua: units given back (0: nothing to do), or why it could not run now. */
  async holdExpire(shard: ShardRef, member: string): Promise<number | 'missing' | 'paused'> {
    const k = this.keys(shard);
    const [r0, r1, r2] = this.buckets(k, 'records', this.clock());
    const requestId = member.slice(0, member.indexOf('|'));
    const r = (await this.fn.holdExpire(k.shard, r0, r1, r2, k.users, k.holds, member, recordField(requestId))) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    if (code === -5) return 'paused';
    return code === 1 ? Number(r[1]) : 0;
  }

  /** The three record hashes a hold may be in, and its field (HoldStore.read). */
  recordPlaces(shard: ShardRef, requestId: string): { keys: string[]; field: string | Buffer } {
    const [r0, r1, r2] = this.buckets(this.keys(shard), 'records', this.clock());
    return { keys: [r0, r1, r2], field: recordField(requestId) };
  }

  /** compensate-6.lua. limited: the coupon has a per-user limit (the record's user gets its units back). */
  async compensate(shard: ShardRef, requestId: string, reason: string, limited: boolean): Promise<CompensateScriptResult> {
    const k = this.keys(shard);
    const now = this.clock();
    const [r0, r1, r2, first] = this.buckets(k, 'records', now);
    const r = (await this.fn.compensate(
      k.shard,
      r0,
      r1,
      r2,
      k.users,
      k.outbox,
      requestId,
      recordField(requestId),
      reason,
      shard.couponId,
      shard.index,
      now,
      limited ? 1 : 0,
      this.windowS,
      first,
    )) as Reply;
    return parseCompensate(r);
  }

  /** claim-4.lua: what was claimed before (null: claimed now). */
  async claim(shard: ShardRef, requestId: string, value: string, holdS: number): Promise<ClaimReply> {
    const k = this.keys(shard);
    const [c0, c1, c2, first] = this.buckets(k, 'claims', this.clock());
    const r = (await this.fn.claim(k.shard, c0, c1, c2, recordField(requestId), value, holdS * 1000, this.windowS, first)) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    if (code === -8) throw clockSkew();
    return code === 1 ? String(r[1]) : null;
  }

  /** claim-read-4.lua. */
  async claimRead(shard: ShardRef, requestId: string): Promise<ClaimReply> {
    const k = this.keys(shard);
    const [c0, c1, c2, first] = this.buckets(k, 'claims', this.clock());
    const r = (await this.fn.claimRead(k.shard, c0, c1, c2, recordField(requestId), this.windowS, first)) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    if (code === -8) throw clockSkew();
    return code === 1 ? String(r[1]) : null;
  }

  /** outbox-probe-1.lua: the length and oldest entry id of each of `streams` (outbox keys one master serves,
   * the first routing the call), undefined for a stream that node does not serve. */
  async outboxProbe(streams: readonly string[]): Promise<({ length: number; oldestId: string } | undefined)[]> {
    if (streams.length === 0) return [];
    const r = (await this.fn.outboxProbe(streams[0]!, ...streams)) as Reply;
    let next = streams.length;
    return streams.map((_, i) => {
      const length = Number(r[i]);
      if (!(length >= 0)) return undefined;
      return { length, oldestId: length > 0 ? String(r[next++] ?? '') : '' };
    });
  }

  /** claim-keep-3.lua: keeps the claim for the window (onlyIfAbsent: puts it back only where none is). */
  async claimKeep(shard: ShardRef, requestId: string, value: string, onlyIfAbsent: boolean): Promise<boolean> {
    const k = this.keys(shard);
    const [c0, c1, c2, first] = this.buckets(k, 'claims', this.clock());
    const r = Number(await this.fn.claimKeep(c0, c1, c2, recordField(requestId), value, this.windowS, first, onlyIfAbsent ? 1 : 0));
    if (r === -8) throw clockSkew();
    return r === 1;
  }

  /** 'missing': the shard hash is gone, and its records with it. */
  async recordRead(shard: ShardRef, requestId: string): Promise<RequestRecord | null | 'missing'> {
    const recs = await this.recordReads(shard, [requestId]);
    return recs === 'missing' ? recs : (recs[0] ?? null);
  }

  /** record-read-4.lua: the records of several requests of one shard in one call, null where there is none;
   * 'missing' when the shard hash is gone (its records went with it: "none" would be a guess). */
  async recordReads(shard: ShardRef, requestIds: readonly string[]): Promise<(RequestRecord | null)[] | 'missing'> {
    return this.parseRecordReads((await this.fn.recordRead(...this.recordReadArgs(shard, requestIds))) as Reply, requestIds.length);
  }

  /** record-read-4.lua's keys and arguments, for a caller that sends it itself (record-read-batcher.ts, to the
   * node a redirect names); parseRecordReads reads its reply. */
  recordReadArgs(shard: ShardRef, requestIds: readonly string[]): Arg[] {
    const k = this.keys(shard);
    const [r0, r1, r2, first] = this.buckets(k, 'records', this.clock());
    const args: Arg[] = [k.shard, r0, r1, r2, this.windowS, first];
    for (const id of requestIds) args.push(recordField(id));
    return args;
  }

  parseRecordReads(reply: Reply, n: number): (RequestRecord | null)[] | 'missing' {
    const read = readRecords(reply, 0, n);
    if (read instanceof Error) throw read;
    return read;
  }

  /** node-read-1.lua's command for the record reads of several shards one master serves (the first routes it),
   * as sent on that master's own connection. */
  nodeReadCommand(groups: readonly { shard: ShardRef; requestIds: readonly string[] }[]): Arg[] {
    const at = this.clock();
    const args: Arg[] = ['evalsha', NODE_READ.sha, 1, this.keys(groups[0]!.shard).shard];
    for (const g of groups) {
      const k = this.keys(g.shard);
      const [r0, r1, r2, first] = this.buckets(k, 'records', at);
      args.push(k.shard, r0, r1, r2, this.windowS, first, g.requestIds.length);
      for (const id of g.requestIds) args.push(recordField(id));
    }
    return args;
  }

  /** node-read-1.lua's reply, per group as recordReads() answers it; 'elsewhere' for a shard its node does
   * not serve (or could not read): that one is to be read on its own. */
  parseNodeRead(groups: readonly { requestIds: readonly string[] }[], reply: Reply): NodeReadAnswer[] {
    let at = 0;
    return groups.map((g) => {
      const n = g.requestIds.length;
      const read = Number(reply[at]) === -10 ? 'elsewhere' : readRecords(reply, at, n);
      at += 1 + n;
      return read;
    });
  }

  /** move-out-2.lua: units taken. */
  async moveOut(source: ShardRef, moveId: string, target: number, want: number): Promise<number | 'missing' | 'paused'> {
    const k = this.keys(source);
    const taken = Number(await this.fn.moveOut(k.shard, k.moves, moveId, target, want, this.clock()));
    if (taken === -4) return 'missing';
    if (taken === -5) return 'paused';
    return taken;
  }

  /** move-ack-2.lua. */
  async moveAck(source: ShardRef, moveId: string): Promise<boolean> {
    const k = this.keys(source);
    return Number(await this.fn.moveAck(k.shard, k.moves, moveId)) === 1;
  }

  /** credit-2.lua. */
  async credit(shard: ShardRef, creditId: string, quantity: number, retentionMs: number, epoch?: string): Promise<CreditResult> {
    const k = this.keys(shard);
    const args: (string | number)[] = [k.shard, k.credits, creditId, quantity, this.clock(), retentionMs];
    if (epoch !== undefined) args.push(epoch);
    const r = (await this.fn.credit(...args)) as Reply;
    const code = Number(r[0]);
    if (code === -4) return 'missing';
    if (code === -5) return 'paused';
    if (code === -6) return 'stale';
    return code === 1 ? 'applied' : 'already';
  }

  /** shard-pause-1.lua. */
  async shardPause(shard: ShardRef, token: string, holdMs: number, mode: 'new' | 'extend'): Promise<PauseResult> {
    const r = (await this.fn.shardPause(this.keys(shard).shard, token, holdMs, mode)) as number[];
    const code = Number(r[0]);
    if (code === 1) {
      return {
        kind: 'paused',
        shard: { index: shard.index, available: Number(r[1]), inTransit: transitUnits(r[2]), net: Number(r[3]), held: Number(r[4] ?? 0) },
      };
    }
    if (code === 0) return { kind: 'missing' };
    if (code === -5) return { kind: 'busy', waitMs: Number(r[1]) };
    return { kind: 'lost' };
  }

  /** shard-resume-1.lua. */
  async shardResume(shard: ShardRef, token: string): Promise<boolean> {
    return Number(await this.fn.shardResume(this.keys(shard).shard, token)) === 1;
  }

  /** shard-adjust-2.lua: null when the pause lapsed or is not ours. */
  async shardAdjust(
    shard: ShardRef,
    token: string,
    delta: number,
    credits: readonly Credit[],
  ): Promise<{ available: number; applied: number } | null> {
    const k = this.keys(shard);
    const args: (string | number)[] = [k.shard, k.credits, token, delta, this.clock()];
    for (const c of credits) args.push(c.id, c.quantity);
    const r = (await this.fn.shardAdjust(...args)) as number[];
    if (Number(r[0]) !== 1) return null;
    return { available: Number(r[1]), applied: Number(r[2]) };
  }

  /** shard-rebuild-3.lua: false when the shard exists and is not ours. */
  async shardRebuild(
    shard: ShardRef,
    token: string,
    holdMs: number,
    available: number,
    net: number,
    creditIds: readonly string[],
  ): Promise<boolean> {
    const k = this.keys(shard);
    const r = Number(
      await this.fn.shardRebuild(k.shard, k.outbox, k.credits, token, holdMs, available, net, RELAY_GROUP, this.clock(), ...creditIds),
    );
    return r !== 0;
  }

  /** record-restore-3.lua: true when written (never over an existing record). */
  async recordRestore(shard: ShardRef, rec: RecordToRestore): Promise<boolean> {
    const k = this.keys(shard);
    const [r0, r1, r2, first] = this.buckets(k, 'records', this.clock());
    const r = Number(
      await this.fn.recordRestore(
        r0,
        r1,
        r2,
        recordField(rec.requestId),
        rec.userId,
        rec.quantity,
        rec.occurredAt,
        `${rec.refused ? 'x' : ''}${rec.compensated ? 'c' : ''}${rec.hold ? 'h' : ''}`,
        this.windowS,
        first,
      ),
    );
    if (r === -8) throw clockSkew();
    return r === 1;
  }

  /** legacy-fold-5.lua: moves one legacy per-request key of shard `tag` into the bucketed hashes. */
  async legacyFold(tag: string, kind: 'req' | 'claim' | 'user', id: string, holdMs: number): Promise<boolean> {
    const k = shardKeys(this.namespace, tag);
    const legacyKey = kind === 'req' ? k.legacy.request(id) : kind === 'claim' ? k.legacy.claim(id) : k.legacy.user(id);
    const [b0, b1, b2, first] = this.buckets(k, kind === 'claim' ? 'claims' : 'records', this.clock());
    const field = kind === 'user' ? id : recordField(id);
    const r = Number(await this.fn.legacyFold(legacyKey, b0, b1, b2, k.users, kind, field, this.windowS, first, holdMs));
    if (r === -8) throw clockSkew();
    return r === 1;
  }

  /** refuse-mark-3.lua: 'given_back' when a Compensate before the mark put the units back on sale. */
  async refuseMark(shard: ShardRef, requestId: string): Promise<RefuseMarkResult> {
    const [r0, r1, r2, first] = this.buckets(this.keys(shard), 'records', this.clock());
    const r = Number(await this.fn.refuseMark(r0, r1, r2, recordField(requestId), this.windowS, first));
    if (r === -8) throw clockSkew();
    return r === 2 ? 'given_back' : r === 1 ? 'marked' : 'gone';
  }

  /** order-open-1.lua: created, the existing record's fields (HGETALL), or the field a reuse differs in. */
  orderOpenCall(
    orderId: string,
    spec: { kind: string; userId: string; items: string; ttlMs: number },
    nowMs: number,
    windowS: number,
  ): ScriptCall<OrderOpenReply> {
    const args = [orderKey(this.namespace, orderId), spec.kind, spec.userId, spec.items, spec.ttlMs, nowMs, windowS];
    return { name: 'orderOpen', args, parse: parseOrderOpen };
  }

  /** order-move-1.lua: the record's fields (HGETALL) after the attempt, and whether it moved. */
  orderMoveCall(
    orderId: string,
    from: string[],
    to: string,
    nowMs: number,
    notAfterMs: number,
    set: (string | number)[],
  ): ScriptCall<OrderMoveReply> {
    const keepS = 2 * this.windowS + 60;
    return {
      name: 'orderMove',
      args: [orderKey(this.namespace, orderId), from.join(','), to, nowMs, notAfterMs, keepS, ...set],
      parse: parseOrderMove,
    };
  }
}

export type OrderOpenReply =
  | { kind: 'created' }
  | { kind: 'found'; fields: string[] }
  | { kind: 'conflict'; field: string; recorded: string };
export type OrderMoveReply = { kind: 'moved' | 'late' | 'other'; fields: string[] } | { kind: 'missing' };

function parseOrderOpen(r: Reply): OrderOpenReply {
  const code = Number(r[0]);
  if (code === 0) return { kind: 'created' };
  if (code === 1) return { kind: 'found', fields: r.slice(1).map(String) };
  if (code === -3) return { kind: 'conflict', field: String(r[1]), recorded: String(r[2]) };
  throw new Error(`order-open-1.lua returned unknown code ${code}`);
}

function parseOrderMove(r: Reply): OrderMoveReply {
  const code = Number(r[0]);
  if (code === -4) return { kind: 'missing' };
  const fields = r.slice(1).map(String);
  if (code === 0) return { kind: 'moved', fields };
  if (code === -1) return { kind: 'late', fields };
  if (code === 1) return { kind: 'other', fields };
  throw new Error(`order-move-1.lua returned unknown code ${code}`);
}

function parseDeduct(r: Reply): DeductScriptResult {
  const code = Number(r[0]);
  if (code === 1) return { kind: 'deducted', remaining: Number(r[1]) };
  if (code === 2) return { kind: 'replay', remaining: Number(r[1]), compensated: Number(r[2]) === 1 };
  if (code === -1) return { kind: 'short', available: Number(r[1]), epoch: String(r[2] ?? '') };
  if (code === -2) return { kind: 'user_limit', held: Number(r[1]) };
  if (code === -3) return { kind: 'conflict', field: conflictField(r[1]), recorded: String(r[2] ?? '') };
  if (code === -4) return { kind: 'missing' };
  if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
  if (code === -7) return { kind: 'stale_credits' };
  if (code === -8) throw clockSkew();
  throw new Error(`deduct-7.lua returned unknown code ${code}`);
}

function conflictField(f: unknown): 'user_id' | 'quantity' | 'kind' {
  return f === 'user_id' ? 'user_id' : f === 'kind' ? 'kind' : 'quantity';
}

function parseCompensate(r: Reply): CompensateScriptResult {
  const code = Number(r[0]);
  if (code === 1) return { kind: 'compensated', remaining: Number(r[1]), quantity: Number(r[2]) };
  if (code === 2) return { kind: 'already', remaining: Number(r[1]) };
  if (code === 3) return { kind: 'not_deducted' };
  if (code === -4) return { kind: 'missing' };
  if (code === -5) return { kind: 'paused', waitMs: Number(r[1]) };
  if (code === -8) throw clockSkew();
  throw new Error(`compensate-6.lua returned unknown code ${code}`);
}
