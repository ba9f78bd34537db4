// Group commit per shard: Deducts, Compensates and Reserves bound for the same shard that arrive in the same
// event-loop turn (up to `max` of them, or within `waitUs`) share one Lua call (shard-batch-8.lua), one socket
// write and one replication round, as group commit in databases and TigerBeetle's batches do. Each request
// keeps exactly its single-call semantics (the script runs the same steps per request, lua/includes/shard-ops.lua
// and shard-reserve.lua) and gets
// its own answer or its own error; a request whose deadline passed while it waited is dropped from the batch.
//
// One call per shard is in flight at a time, from its send to its replica ack: requests that arrive meanwhile
// wait and go together in the next call, as a database's next group commit gathers while the current one is
// flushed. A shard's script calls run one after another on its master anyway; sending them one at a time only
// makes them larger. Most of a call's Redis CPU is per call (the script's entry, its reads and writes of the
// shard, their replication), not per request: measured with bench/redis-cost.ts at 256 in flight over 16
// shards, calls went from ~3 requests to ~10 and Redis CPU per deduction from ~64 µs to ~38 µs. A call that
// takes longer than BUSY_AT_MOST_MS no longer holds the shard.
//
// The batches of every shard one master holds that leave in the same tick go as one node-batch-1.lua call on
// that master's own connection (onMaster), with the replica WAIT in the same write at the `replica` level: a
// call's entry and the client's per-command work are paid once per master and round, not once per shard.
// One such call per master is in flight: the shards that become ready while it is out wait for it and then
// leave together. Whatever that path cannot finish for sure (NOSCRIPT, a closed connection) goes again through
// the cluster client, one shard-batch-8.lua call per shard. A shard whose slot is moving or moved (a redirect,
// TRYAGAIN, a shard not on the node) is sent by hand to whichever node serves it (direct): the cluster client
// follows redirects only for a command sent alone, and its WAIT would go to the slot map's master, not to the
// node an ASK sent the write to.
import type { CompensateScriptResult, DeductScriptInput, DeductScriptResult, ShardRef } from '../domain/ports.js';
import { DomainError } from '../domain/errors.js';
import { isRedirect, luaScript } from './cluster.js';
import { isTryAgain, sendFollowing } from './redirects.js';
import { type Arg, type BatchOp, type BatchReply, parseShardBatch, type Reply, type Scripts } from './scripts.js';
import { CallGap } from './call-gap.js';
import { takeTurn } from './shard-turn.js';

export interface ShardBatcherOptions {
  /** Most requests per call; a full batch is sent at once. */
  max: number;
  /** How long the first request of a batch waits for company: 0 = until the end of the current event-loop
   * turn (setImmediate); otherwise µs, rounded up to the timer's 1 ms resolution. */
  waitUs: number;
  /** Group commit under load (call-gap.ts): while requests arrive fast enough that a master's next call
   * would carry at least `gapFrom`, it leaves no sooner than `gapUs` after the previous one (0 or absent: as
   * soon as that one is back). Requests whose deadline passes meanwhile are dropped at dispatch; BUSY_AT_MOST_MS
   * frees the master regardless, so the configured gap stays below it. */
  gapUs?: number | undefined;
  gapFrom?: number | undefined;
  /** True at the `replica` ack level: replays inside a batch are vouched for by the script (keys.ts ack). */
  vouch: boolean;
  /** Before the call (the failover fence): throws to refuse the whole batch; returns the slot's master. */
  beforeWrite(shardKey: string): string | undefined;
  /** After the call, once, when any request wrote or vouched (the coalesced WAIT at the `replica` level). */
  afterWrite(shardKey: string, ownerBefore: string | undefined): Promise<void>;
  /** Every batch's size, as sent (for the histogram on /metrics). */
  onBatch?: ((size: number) => void) | undefined;
  /** Sends calls on a master's own connection in one write, at the `replica` level with their WAIT after them
   * (ReplicaAck.pipelineWithWait; ack null at the `leader` level); undefined when that master has no ready
   * connection. Absent: every shard's call goes through the cluster client and waits with afterWrite. */
  onMaster?:
    | ((
        nodeKey: string,
        commands: readonly (readonly Arg[])[],
      ) => Promise<{ results: [Error | null, unknown][]; ack: Error | null } | undefined>)
    | undefined;
  /** Asked when a call sent on a node's connection came back redirected (the client's slot map is stale). */
  onRedirect?: (() => void) | undefined;
  /** Loads a script on a master that answered NOSCRIPT (onMaster sends EVALSHA itself). */
  loadScript?: ((nodeKey: string, lua: string) => void) | undefined;
}

interface Pending {
  op: BatchOp;
  signal: AbortSignal | undefined;
  resolve(r: DeductScriptResult | CompensateScriptResult): void;
  reject(err: unknown): void;
}

interface Queue {
  shard: ShardRef;
  items: Pending[];
}

/** A shard's call, taken and waiting for the other shards of its master to go in the same write. */
interface Ready {
  q: Queue;
  release: () => void;
}

/** ioredis's message for a command whose connection closed before its reply came. */
const CONNECTION_CLOSED = 'Connection is closed.';
/** The longest a shard's next requests wait for its call in flight before they are sent beside it. */
const BUSY_AT_MOST_MS = 100;
/** As the client's own retryDelayOnFailover (cluster.ts). */
const RESEND_AFTER_MS = 200;

/** The answers that stand for a write (or vouch for one) and so wait for the replica ack. */
const NEEDS_ACK = new Set(['deducted', 'replay', 'compensated', 'already']);
const NODE_BATCH = luaScript('nodeBatch');
const SHARD_BATCH = luaScript('shardBatch');
/** node-batch-1.lua's code for a shard whose keys its node does not serve (or not all of them: a slot moving). */
const NOT_HERE = -10;

export class ShardBatcher {
  /** Requests waiting for their shard's next call, by shard tag. */
  private queues = new Map<string, Queue>();
  /** Shards whose call is in flight: until its replies are out (after the replica ack at the `replica` level). */
  private readonly busy = new Set<string>();
  private scheduled = false;
  /** Calls taken in this tick, sent together per master at its end (onMaster only). */
  private ready: Ready[] = [];
  /** Masters with a call out (takeTurn, as shards are), and the groups waiting for each. */
  private readonly mastersOut = new Set<string>();
  private readonly parked = new Map<string, Ready[]>();
  private readonly gap: CallGap;
  /** Since start: Redis calls sent (one per master and round, or one per shard on the cluster client's path),
   * the shards' batches they carried and the requests in those (the benchmark's requests per call), and the
   * batches sent again because their connection closed under them (their callers never saw that). */
  readonly sent = { calls: 0, shards: 0, requests: 0, resent: 0 };

  constructor(
    private readonly scripts: Scripts,
    private readonly options: ShardBatcherOptions,
  ) {
    this.gap = new CallGap((options.gapUs ?? 0) / 1000, options.gapFrom ?? 1);
  }

  deduct(shard: ShardRef, input: DeductScriptInput, signal?: AbortSignal): Promise<DeductScriptResult> {
    return this.enqueue(shard, { op: 'D', input }, signal) as Promise<DeductScriptResult>;
  }

  compensate(shard: ShardRef, requestId: string, reason: string, limited: boolean, signal?: AbortSignal): Promise<CompensateScriptResult> {
    return this.enqueue(shard, { op: 'C', requestId, reason, limited }, signal) as Promise<CompensateScriptResult>;
  }

  /** A Reserve without fallback credits (hold-reserve-7.lua's answers; a replay's hold state is read apart). */
  reserve(shard: ShardRef, input: DeductScriptInput & { ttlMs: number }, signal?: AbortSignal): Promise<DeductScriptResult> {
    return this.enqueue(shard, { op: 'R', input }, signal) as Promise<DeductScriptResult>;
  }

  private enqueue(shard: ShardRef, op: BatchOp, signal: AbortSignal | undefined): Promise<DeductScriptResult | CompensateScriptResult> {
    return new Promise((resolve, reject) => {
      let q = this.queues.get(shard.tag);
      if (!q) {
        q = { shard, items: [] };
        this.queues.set(shard.tag, q);
      }
      q.items.push({ op, signal, resolve, reject });
      if (this.busy.has(shard.tag)) return; // sent when the call in flight comes back
      if (q.items.length >= this.options.max) {
        this.take(shard.tag);
        return;
      }
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    if (this.options.waitUs > 0) setTimeout(() => this.flush(), Math.ceil(this.options.waitUs / 1000));
    else setImmediate(() => this.flush());
  }

  /** Sends every idle shard's batch in the same tick: auto-pipelining then puts those bound for one master
   * into one socket write. */
  private flush(): void {
    this.scheduled = false;
    for (const tag of [...this.queues.keys()]) if (!this.busy.has(tag)) this.take(tag);
  }

  /** Sends up to `max` of the shard's waiting requests as its call in flight; the rest wait for the next. */
  private take(tag: string): void {
    const q = this.queues.get(tag);
    if (!q) return;
    const max = this.options.max;
    let items: Pending[];
    if (q.items.length <= max) {
      items = q.items;
      this.queues.delete(tag);
    } else {
      items = q.items.splice(0, max);
    }
    const release = takeTurn(this.busy, tag, BUSY_AT_MOST_MS, () => {
      if (this.queues.has(tag)) this.take(tag);
    });
    if (this.options.onMaster) {
      // Shards freed by one WAIT's reply are taken one by one in the same microtask run; process.nextTick runs
      // after it, so they leave together, as ioredis's auto-pipelining gathers its commands.
      if (this.ready.length === 0) process.nextTick(() => this.sendReady());
      this.ready.push({ q: { shard: q.shard, items }, release });
      return;
    }
    this.send({ shard: q.shard, items }, release).then(release, release);
  }

  /** The calls taken in this tick: per master, one call for all of its shards (and its WAIT) in one write. */
  private sendReady(): void {
    const ready = this.ready;
    this.ready = [];
    this.dispatch(ready);
  }

  /** Groups calls by the master their shard is on now (asking the failover fence each time, also for calls
   * that waited for their master), and sends each group. */
  private dispatch(ready: readonly Ready[]): void {
    const byMaster = new Map<string, Ready[]>();
    for (const r of ready) {
      const items = this.live(r.q.items);
      if (items.length === 0) {
        r.release();
        continue;
      }
      let owner: string | undefined;
      try {
        const key = this.scripts.keys(r.q.shard).shard;
        owner = this.options.beforeWrite(key);
      } catch (err) {
        r.release();
        for (const p of items) p.reject(err);
        continue;
      }
      const next = { q: { shard: r.q.shard, items }, release: r.release };
      if (owner === undefined) {
        this.plain(next);
        continue;
      }
      const group = byMaster.get(owner);
      if (group) group.push(next);
      else byMaster.set(owner, [next]);
    }
    for (const [owner, group] of byMaster) this.toMaster(owner, group);
  }

  /** One call per master in flight: a group for a master whose call is out waits for that call's end, then
   * leaves with whatever its shards gathered meanwhile. The master runs its calls one after another anyway; a
   * second call beside the first only splits the next round into two smaller ones, each paying the call's
   * fixed cost (measured in the flash sale: Redis CPU per deduction 58 and 52 µs -> 49 and 50 µs, p99.9
   * 388 and 392 ms -> 213 and 199 ms). A call out longer than BUSY_AT_MOST_MS stops holding the master back. */
  private toMaster(owner: string, group: Ready[]): void {
    if (this.mastersOut.has(owner)) {
      const parked = this.parked.get(owner);
      if (parked) for (const r of group) parked.push(r);
      else this.parked.set(owner, group);
      return;
    }
    const free = takeTurn(this.mastersOut, owner, BUSY_AT_MOST_MS, () => this.unpark(owner));
    let size = 0;
    for (const r of group) size += r.q.items.length;
    const hold = this.gap.sent(owner, size);
    // Nothing in sendOnMaster should throw; if something did, its requests must not wait for their deadlines.
    this.sendOnMaster(owner, group)
      .catch((err: unknown) => {
        for (const r of group) {
          r.release();
          for (const p of r.q.items) p.reject(err);
        }
      })
      .finally(() => hold(free));
  }

  /** Sends the groups that waited for `owner`'s call, each shard's batch topped up with the requests that
   * queued behind it meanwhile (the shard stayed taken, so they could not leave on their own). */
  private unpark(owner: string): void {
    const groups = this.parked.get(owner);
    if (!groups) return;
    this.parked.delete(owner);
    for (const r of groups) {
      const q = this.queues.get(r.q.shard.tag);
      const room = this.options.max - r.q.items.length;
      if (!q || room <= 0) continue;
      const more = q.items.length <= room ? q.items : q.items.splice(0, room);
      if (more === q.items) this.queues.delete(r.q.shard.tag);
      for (const p of more) r.q.items.push(p);
    }
    // With the shards the call's replies just freed (take), in the same write.
    if (this.ready.length === 0) process.nextTick(() => this.sendReady());
    for (const r of groups) this.ready.push(r);
  }

  /** A call through the cluster client and afterWrite (no connection to its master, or a re-send). */
  private plain(r: Ready, retried = false): void {
    if (retried) this.sent.resent++;
    this.send(r.q, r.release, retried).then(r.release, r.release);
  }

  /** One node-batch-1.lua call for every shard of the group (all on master `owner`), then its WAIT at the
   * `replica` level. */
  private async sendOnMaster(owner: string, group: Ready[]): Promise<void> {
    const batches = group.map((r) => ({ shard: r.q.shard, ops: r.q.items.map((p) => p.op) }));
    const args: Arg[] = [
      'evalsha',
      NODE_BATCH.sha,
      1,
      this.scripts.keys(group[0]!.q.shard).shard,
      ...this.scripts.nodeBatchArgs(batches, this.options.vouch),
    ];
    this.sent.calls++;
    this.sent.shards += group.length;
    for (const r of group) this.sent.requests += r.q.items.length;
    let out: Awaited<ReturnType<NonNullable<ShardBatcherOptions['onMaster']>>>;
    try {
      out = await this.options.onMaster!(owner, [args]);
    } catch (err) {
      // The connection closed under the write: whether the script ran is unknown, and sending the batches
      // again is safe (every request is idempotent by its request id), as in send().
      if (err instanceof Error && err.message === CONNECTION_CLOSED) {
        await new Promise((r) => setTimeout(r, RESEND_AFTER_MS));
        for (const r of group) this.plain(r, true);
        return;
      }
      for (const r of group) {
        r.release();
        for (const p of r.q.items) p.reject(err);
      }
      return;
    }
    if (out === undefined) {
      for (const r of group) this.plain(r);
      return;
    }
    const [err, flat] = out.results[0]!;
    if (err) {
      // NOSCRIPT (the node restarted, or is a promoted replica: loaded for the next round, and this one goes
      // through the cluster client, which loads shard-batch-8.lua itself) or a closed connection: each batch is
      // sent again through the cluster client, once. A redirect or TRYAGAIN (the first shard's slot moved or is
      // moving; the script did not run): each batch to the node that serves it.
      if (isRedirect(err)) this.options.onRedirect?.();
      if (err.message.startsWith('NOSCRIPT')) {
        this.options.loadScript?.(owner, NODE_BATCH.lua);
        for (const r of group) this.plain(r);
      } else if (isRedirect(err) || isTryAgain(err)) {
        for (const r of group) this.direct(r);
      } else if (err.message === CONNECTION_CLOSED) {
        setTimeout(() => {
          for (const r of group) this.plain(r, true);
        }, RESEND_AFTER_MS);
      } else {
        for (const r of group) {
          r.release();
          for (const p of r.q.items) p.reject(err);
        }
      }
      return;
    }
    const values = flat as Reply;
    let at = 0;
    for (const r of group) {
      const ops = r.q.items.map((p) => p.op);
      const mine = values.slice(at, at + 3 * ops.length);
      at += 3 * ops.length;
      if (Number(mine[0]) === NOT_HERE) {
        // This shard's slot is not (or not wholly) on `owner` any more, a failover or a slot moving: nothing of
        // it ran (node-batch-1.lua touches all its keys before its first write). Sent to the node that serves it.
        this.options.onRedirect?.();
        this.direct(r);
        continue;
      }
      this.options.onBatch?.(ops.length);
      r.release();
      this.answer(r.q.items, parseShardBatch(ops, mine), out.ack);
    }
  }

  /** A shard's batch sent by hand to the node that serves its slot (directSend), then its shard freed. */
  private direct(r: Ready): void {
    this.directSend(r.q).then(r.release, r.release);
  }

  /**
   * shard-batch-8.lua (EVAL: the node may never have run it) with the shard's keys declared, on the connection
   * of the node that serves the shard (sendFollowing), with the replica WAIT in the same write: the WAIT goes
   * to the node that ran the write, which the client's afterWrite cannot know after it followed an ASK.
   * `first`: the redirect or TRYAGAIN that sent the batch here. Requests whose deadline passed are dropped
   * before each try.
   */
  private async directSend(q: Queue, first?: Error): Promise<void> {
    const shardKey = this.scripts.keys(q.shard).shard;
    let items = q.items;
    let reply: { flat: Reply; ack: unknown } | null;
    try {
      reply = await sendFollowing<{ flat: Reply; ack: unknown } | null>(first, {
        owner: () => this.options.beforeWrite(shardKey),
        refresh: () => this.options.onRedirect?.(),
        send: async (node, asking) => {
          items = this.live(items);
          if (items.length === 0) return [null, null];
          const ops = items.map((p) => p.op);
          const call: Arg[] = [
            'eval',
            SHARD_BATCH.lua,
            SHARD_BATCH.numberOfKeys,
            ...this.scripts.shardBatchArgs(q.shard, ops, this.options.vouch),
          ];
          const out = await this.options.onMaster!(node, asking ? [['asking'], call] : [call]);
          if (!out) return undefined;
          const [e, flat] = out.results[out.results.length - 1]!;
          return [e, { flat: flat as Reply, ack: out.ack }];
        },
      });
    } catch (err) {
      for (const p of items) p.reject(err);
      return;
    }
    if (!reply) return;
    this.sent.calls++;
    this.sent.shards++;
    this.sent.requests += items.length;
    this.answer(
      items,
      parseShardBatch(
        items.map((p) => p.op),
        reply.flat,
      ),
      reply.ack,
    );
  }

  private live(items: Pending[]): Pending[] {
    return items.filter((p) => {
      if (!p.signal?.aborted) return true;
      p.reject(new DomainError('deadline_exceeded', 'the call was cancelled or its deadline passed before it could finish'));
      return false;
    });
  }

  /** Each request its reply; a write (or a vouch) whose replica ack failed gets that failure instead. */
  private answer(items: Pending[], replies: BatchReply[], acked: unknown): void {
    items.forEach((p, i) => {
      const r = replies[i]!;
      if (r instanceof Error) p.reject(r);
      else if (acked !== null && NEEDS_ACK.has(r.kind)) p.reject(acked);
      else p.resolve(r);
    });
  }

  /** release: frees the shard for its next call; called when the call failed for good, else when send ends. */
  private async send(q: Queue, release: () => void, retried = false): Promise<void> {
    const items = this.live(q.items);
    if (items.length === 0) return;
    if (!retried) this.options.onBatch?.(items.length);
    this.sent.calls++;
    this.sent.shards++;
    this.sent.requests += items.length;
    const shardKey = this.scripts.keys(q.shard).shard;
    let replies: BatchReply[];
    let owner: string | undefined;
    try {
      owner = this.options.beforeWrite(shardKey);
      replies = await this.scripts.shardBatch(
        q.shard,
        items.map((p) => p.op),
        this.options.vouch,
      );
    } catch (err) {
      // The node's connection closed under the call (a failover, a node restarting) while the client was not
      // ready to resend it itself, or the call came back redirected from an auto-pipelined batch (cluster.ts:
      // the script did not run, and the client is refreshing its slot map). Sending the batch again is safe:
      // every request in it is idempotent by its request id, so one that ran before the connection closed is
      // found and answered as a replay (what the caller's own retry would get). Once only: a second failure
      // is the caller's to retry. With node connections (onMaster), a redirect or TRYAGAIN is followed to the
      // node that serves the shard instead (directSend).
      if (this.options.onMaster && (isRedirect(err) || isTryAgain(err))) return this.directSend({ shard: q.shard, items }, err as Error);
      if (!retried && (isRedirect(err) || (err instanceof Error && err.message === CONNECTION_CLOSED))) {
        await new Promise((r) => setTimeout(r, RESEND_AFTER_MS));
        this.sent.resent++;
        return this.send({ shard: q.shard, items }, release, true);
      }
      release();
      for (const p of items) p.reject(err);
      return;
    }

    let acked: unknown = null;
    if (replies.some((r) => !(r instanceof Error) && NEEDS_ACK.has(r.kind))) {
      try {
        await this.options.afterWrite(shardKey, owner);
      } catch (err) {
        acked = err ?? new Error('replica ack failed');
      }
    }
    this.answer(items, replies, acked);
  }
}
