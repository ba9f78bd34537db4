// Group commit per shard: Deducts and Compensates bound for the same shard that arrive in the same event-loop
// turn (up to `max` of them, or within `waitUs`) share one Lua call (shard-batch-7.lua), one socket write and
// one replication round, as group commit in databases and TigerBeetle's batches do. Each request keeps exactly
// its single-call semantics (the script runs the same steps per request, lua/includes/shard-ops.lua) and gets
// its own answer or its own error; a request whose deadline passed while it waited is dropped from the batch.
import type { CompensateScriptResult, DeductScriptInput, DeductScriptResult, ShardRef } from '../domain/ports.js';
import { DomainError } from '../domain/errors.js';
import { isRedirect } from './cluster.js';
import type { BatchOp, BatchReply, Scripts } from './scripts.js';

export interface ShardBatcherOptions {
  /** Most requests per call; a full batch is sent at once. */
  max: number;
  /** How long the first request of a batch waits for company: 0 = until the end of the current event-loop
   * turn (setImmediate); otherwise µs, rounded up to the timer's 1 ms resolution. */
  waitUs: number;
  /** True at the `replica` ack level: replays inside a batch are vouched for by the script (keys.ts ack). */
  vouch: boolean;
  /** Before the call (the failover fence): throws to refuse the whole batch; returns the slot's master. */
  beforeWrite(shardKey: string): string | undefined;
  /** After the call, once, when any request wrote or vouched (the coalesced WAIT at the `replica` level). */
  afterWrite(shardKey: string, ownerBefore: string | undefined): Promise<void>;
  /** Every batch's size, as sent (for the histogram on /metrics). */
  onBatch?: ((size: number) => void) | undefined;
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

/** ioredis's message for a command whose connection closed before its reply came. */
const CONNECTION_CLOSED = 'Connection is closed.';
/** As the client's own retryDelayOnFailover (cluster.ts). */
const RESEND_AFTER_MS = 200;

/** The answers that stand for a write (or vouch for one) and so wait for the replica ack. */
const NEEDS_ACK = new Set(['deducted', 'replay', 'compensated', 'already']);

export class ShardBatcher {
  private queues = new Map<string, Queue>();
  private scheduled = false;

  constructor(
    private readonly scripts: Scripts,
    private readonly options: ShardBatcherOptions,
  ) {}

  deduct(shard: ShardRef, input: DeductScriptInput, signal?: AbortSignal): Promise<DeductScriptResult> {
    return this.enqueue(shard, { op: 'D', input }, signal) as Promise<DeductScriptResult>;
  }

  compensate(shard: ShardRef, requestId: string, reason: string, limited: boolean, signal?: AbortSignal): Promise<CompensateScriptResult> {
    return this.enqueue(shard, { op: 'C', requestId, reason, limited }, signal) as Promise<CompensateScriptResult>;
  }

  private enqueue(shard: ShardRef, op: BatchOp, signal: AbortSignal | undefined): Promise<DeductScriptResult | CompensateScriptResult> {
    return new Promise((resolve, reject) => {
      let q = this.queues.get(shard.tag);
      if (!q) {
        q = { shard, items: [] };
        this.queues.set(shard.tag, q);
      }
      q.items.push({ op, signal, resolve, reject });
      if (q.items.length >= this.options.max) {
        this.queues.delete(shard.tag);
        void this.send(q);
        return;
      }
      if (!this.scheduled) {
        this.scheduled = true;
        if (this.options.waitUs > 0) setTimeout(() => this.flush(), Math.ceil(this.options.waitUs / 1000));
        else setImmediate(() => this.flush());
      }
    });
  }

  /** Sends every shard's batch in the same tick: auto-pipelining then puts those bound for one master into
   * one socket write. */
  private flush(): void {
    this.scheduled = false;
    const queues = this.queues;
    this.queues = new Map();
    for (const q of queues.values()) void this.send(q);
  }

  private async send(q: Queue, retried = false): Promise<void> {
    const items = q.items.filter((p) => {
      if (!p.signal?.aborted) return true;
      p.reject(new DomainError('deadline_exceeded', 'the call was cancelled or its deadline passed before it could finish'));
      return false;
    });
    if (items.length === 0) return;
    if (!retried) this.options.onBatch?.(items.length);
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
      // is the caller's to retry.
      if (!retried && (isRedirect(err) || (err instanceof Error && err.message === CONNECTION_CLOSED))) {
        await new Promise((r) => setTimeout(r, RESEND_AFTER_MS));
        return this.send({ shard: q.shard, items }, true);
      }
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
    items.forEach((p, i) => {
      const r = replies[i]!;
      if (r instanceof Error) p.reject(r);
      else if (acked !== null && NEEDS_ACK.has(r.kind)) p.reject(acked);
      else p.resolve(r);
    });
  }
}
