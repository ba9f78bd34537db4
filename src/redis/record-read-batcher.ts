// The sold-out fast path reads one request record per refusal (a replay that did deduct must still get its
// DEDUCTED). Reads bound for the same shard share one record-read-4.lua call: in a sold-out storm every call in
// flight refuses, and one client command per refusal would cost more than the refusal itself (the cluster
// client's per-command work, not Redis, is the bill). A read writes nothing, so a batch has no semantics to
// keep but each request's own answer; a failed call fails its batch's reads alike.
//
// One call per shard is in flight at a time, as in shard-batcher.ts: reads that arrive meanwhile go together
// in the next call. Gathering only per event-loop turn left most storm calls carrying one or two reads (the
// refusals of one turn rarely share a shard); waiting for the call in flight costs a read nothing it would not
// wait anyway, since the shard's calls run one after another on its master. A call that takes longer than
// BUSY_AT_MOST_MS no longer holds the shard: its own readers still wait for it, the next ones go beside it.
//
// With `nodes`, the unit is a master instead of a shard: the reads of every shard a master holds go in one
// node-read-1.lua call on that master's own connection, one call per master in flight. Per shard, a storm
// over 16 shards sent ~1,100 calls a second with ~5 reads each, and each call's client work and socket write
// cost the service more CPU than the RPC it answered. Whatever that path cannot answer for sure (no ready
// connection, NOSCRIPT, a redirect, a shard whose slot is not on that node) is read again per shard through
// the cluster client, which routes and loads scripts itself.
import type { ShardRef } from '../domain/ports.js';
import { isRedirect, luaScript } from './cluster.js';
import { isTryAgain, sendFollowing } from './redirects.js';
import type { RequestRecord } from './request-record.js';
import type { Arg, NodeReadAnswer, Reply, Scripts } from './scripts.js';
import { takeTurn } from './shard-turn.js';

/** The longest a shard's next reads wait for its call in flight before they are sent beside it. */
export const READ_BUSY_AT_MOST_MS = 100;

type ReadAnswer = RequestRecord | null | 'missing';

/** The shard's queue in `queues` (by shard tag), created when it has none. */
function queueIn(queues: Map<string, Queue>, shard: ShardRef): Queue {
  let q = queues.get(shard.tag);
  if (!q) {
    q = { shard, ids: [], waiters: [] };
    queues.set(shard.tag, q);
  }
  return q;
}

/** Most reads in one node-read-1.lua call (its unpack() and reply stay small); the rest wait for the next. */
const NODE_READ_MAX = 1024;
const NODE_READ = luaScript('nodeRead');
const RECORD_READ = luaScript('recordRead');

/** Reaching a master's own connection (master-pipeline.ts), for the per-master calls. */
export interface NodeReadTransport {
  /** The master the client routes `key` to now; undefined while none is known (the shard is read alone). */
  masterOf(key: string): string | undefined;
  /** One command on master `node`'s own connection (after ASKING, when `asking`): its [error, reply];
   * undefined when it has no ready one. */
  send(node: string, command: readonly Arg[], asking?: boolean): Promise<[Error | null, unknown] | undefined>;
  /** Loads a script on a master that answered NOSCRIPT. */
  loadScript(node: string, lua: string): void;
  /** The client's slot map proved stale. */
  onRedirect(): void;
}

interface Waiter {
  resolve(r: ReadAnswer): void;
  reject(err: unknown): void;
}

interface Queue {
  shard: ShardRef;
  ids: string[];
  waiters: Waiter[];
}

export class RecordReadBatcher {
  /** Reads waiting for their shard's next call, by shard tag. */
  private readonly queues = new Map<string, Queue>();
  /** Shards whose call is in flight. */
  private readonly busy = new Set<string>();
  private scheduled = false;
  private readonly flushNow = () => this.flush();
  /** Per master (nodes mode): the reads waiting for its next call, by shard tag. */
  private readonly byMaster = new Map<string, Map<string, Queue>>();
  /** Masters whose call is in flight. */
  private readonly mastersBusy = new Set<string>();
  private masterScheduled = false;
  private readonly flushMastersNow = () => this.flushMasters();
  /** Calls sent and reads they carried, since start (the benchmark's reads per call). */
  readonly sent = { calls: 0, reads: 0 };

  constructor(
    private readonly scripts: Pick<
      Scripts,
      'recordReads' | 'recordReadArgs' | 'parseRecordReads' | 'keys' | 'nodeReadCommand' | 'parseNodeRead'
    >,
    /** Most reads per shard and call; a full batch is sent at once when its shard is idle. */
    private readonly max: number,
    /** Every batch's size, as sent (a master's call: each shard's). */
    private readonly onBatch?: (size: number) => void,
    /** Per-master calls; absent: one call per shard through the cluster client. */
    private readonly nodes?: NodeReadTransport,
  ) {}

  /** 'missing': the shard hash is gone, and its records with it. */
  read(shard: ShardRef, requestId: string): Promise<ReadAnswer> {
    const master = this.nodes?.masterOf(this.scripts.keys(shard).shard);
    if (master !== undefined) return this.readOnMaster(master, shard, requestId);
    return new Promise((resolve, reject) => {
      const q = queueIn(this.queues, shard);
      q.ids.push(requestId);
      q.waiters.push({ resolve, reject });
      if (this.busy.has(shard.tag)) return; // sent when the call in flight comes back
      if (q.ids.length >= this.max) {
        this.take(shard.tag);
        return;
      }
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flushNow);
      }
    });
  }

  /** Every idle shard's batch in the same tick: auto-pipelining puts those bound for one master into one write. */
  private flush(): void {
    this.scheduled = false;
    for (const tag of [...this.queues.keys()]) if (!this.busy.has(tag)) this.take(tag);
  }

  /** Sends up to `max` of the shard's waiting reads as its call in flight; the rest wait for the next. */
  private take(tag: string): void {
    const q = this.queues.get(tag);
    if (!q) return;
    let batch: Queue;
    if (q.ids.length <= this.max) {
      batch = q;
      this.queues.delete(tag);
    } else {
      batch = { shard: q.shard, ids: q.ids.splice(0, this.max), waiters: q.waiters.splice(0, this.max) };
    }
    const release = takeTurn(this.busy, tag, READ_BUSY_AT_MOST_MS, () => {
      if (this.queues.has(tag)) this.take(tag);
    });
    this.send(batch).then(release, release);
  }

  private async send(q: Queue): Promise<void> {
    this.onBatch?.(q.ids.length);
    this.sent.calls++;
    this.sent.reads += q.ids.length;
    await this.readAlone(q);
  }

  private readOnMaster(master: string, shard: ShardRef, requestId: string): Promise<ReadAnswer> {
    return new Promise((resolve, reject) => {
      let shards = this.byMaster.get(master);
      if (!shards) {
        shards = new Map();
        this.byMaster.set(master, shards);
      }
      const q = queueIn(shards, shard);
      q.ids.push(requestId);
      q.waiters.push({ resolve, reject });
      if (this.mastersBusy.has(master)) return; // sent when the call in flight comes back
      if (!this.masterScheduled) {
        this.masterScheduled = true;
        setImmediate(this.flushMastersNow);
      }
    });
  }

  private flushMasters(): void {
    this.masterScheduled = false;
    for (const master of [...this.byMaster.keys()]) if (!this.mastersBusy.has(master)) this.takeMaster(master);
  }

  /** Sends the master's waiting reads (up to `max` per shard, NODE_READ_MAX in all) as its call in flight. */
  private takeMaster(master: string): void {
    const shards = this.byMaster.get(master);
    if (!shards) return;
    const groups: Queue[] = [];
    let total = 0;
    for (const [tag, q] of shards) {
      if (total >= NODE_READ_MAX) break;
      const room = Math.min(this.max, NODE_READ_MAX - total);
      if (q.ids.length <= room) {
        groups.push(q);
        shards.delete(tag);
      } else {
        groups.push({ shard: q.shard, ids: q.ids.splice(0, room), waiters: q.waiters.splice(0, room) });
      }
      total += groups[groups.length - 1]!.ids.length;
    }
    if (shards.size === 0) this.byMaster.delete(master);
    if (groups.length === 0) return;
    const release = takeTurn(this.mastersBusy, master, READ_BUSY_AT_MOST_MS, () => {
      if (this.byMaster.has(master)) this.takeMaster(master);
    });
    this.sendOnMaster(master, groups).then(release, release);
  }

  private async sendOnMaster(master: string, groups: Queue[]): Promise<void> {
    const nodes = this.nodes!;
    this.sent.calls++;
    for (const q of groups) {
      this.sent.reads += q.ids.length;
      this.onBatch?.(q.ids.length);
    }
    const asked = groups.map((q) => ({ shard: q.shard, requestIds: q.ids }));
    let out: [Error | null, unknown] | undefined;
    try {
      out = await nodes.send(master, this.scripts.nodeReadCommand(asked));
    } catch {
      out = undefined;
    }
    if (!out || out[0]) {
      // No ready connection, a closed one, NOSCRIPT (a restarted node, a promoted replica: loaded for the next
      // call) or a redirect: a read changes nothing, so every shard is simply read again on its own.
      const err = out?.[0];
      if (err?.message.startsWith('NOSCRIPT')) nodes.loadScript(master, NODE_READ.lua);
      else if (err && isRedirect(err)) nodes.onRedirect();
      await Promise.all(groups.map((q) => this.readAlone(q)));
      return;
    }
    const answers = this.scripts.parseNodeRead(asked, out[1] as Reply);
    const alone: Promise<void>[] = [];
    groups.forEach((q, i) => {
      const a = answers[i]!;
      if (a === 'elsewhere') {
        nodes.onRedirect();
        alone.push(this.readAlone(q));
      } else this.settle(q, a);
    });
    await Promise.all(alone);
  }

  /** A shard's reads through the cluster client (record-read-4.lua), outside any master's call. A redirect
   * or TRYAGAIN (an auto-pipelined command gets them raw: cluster.ts) is followed by hand (readDirect). */
  private async readAlone(q: Queue): Promise<void> {
    try {
      this.settle(q, await this.scripts.recordReads(q.shard, q.ids));
    } catch (err) {
      if (this.nodes && (isRedirect(err) || isTryAgain(err))) return this.readDirect(q, err as Error);
      for (const w of q.waiters) w.reject(err);
    }
  }

  /** record-read-4.lua (EVAL: the node may not have it) on the node that serves the shard (sendFollowing). */
  private async readDirect(q: Queue, first: Error): Promise<void> {
    const nodes = this.nodes!;
    const key = this.scripts.keys(q.shard).shard;
    try {
      const reply = await sendFollowing(first, {
        owner: () => nodes.masterOf(key),
        refresh: () => nodes.onRedirect(),
        send: (node, asking) => nodes.send(node, ['eval', RECORD_READ.lua, 4, ...this.scripts.recordReadArgs(q.shard, q.ids)], asking),
      });
      this.settle(q, this.scripts.parseRecordReads(reply as Reply, q.ids.length));
    } catch (err) {
      for (const w of q.waiters) w.reject(err);
    }
  }

  private settle(q: Queue, a: Exclude<NodeReadAnswer, 'elsewhere'>): void {
    if (a instanceof Error) for (const w of q.waiters) w.reject(a);
    else if (a === 'missing') for (const w of q.waiters) w.resolve('missing');
    else for (let i = 0; i < q.waiters.length; i++) q.waiters[i]!.resolve(a[i] ?? null);
  }
}
