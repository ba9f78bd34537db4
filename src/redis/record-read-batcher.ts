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
import type { ShardRef } from '../domain/ports.js';
import type { RequestRecord } from './request-record.js';
import type { Scripts } from './scripts.js';
import { takeTurn } from './shard-turn.js';

/** The longest a shard's next reads wait for its call in flight before they are sent beside it. */
export const READ_BUSY_AT_MOST_MS = 100;

type ReadAnswer = RequestRecord | null | 'missing';

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
  /** Calls sent and reads they carried, since start (the benchmark's reads per call). */
  readonly sent = { calls: 0, reads: 0 };

  constructor(
    private readonly scripts: Pick<Scripts, 'recordReads'>,
    /** Most reads per call; a full batch is sent at once when its shard is idle. */
    private readonly max: number,
    /** Every batch's size, as sent. */
    private readonly onBatch?: (size: number) => void,
  ) {}

  /** 'missing': the shard hash is gone, and its records with it. */
  read(shard: ShardRef, requestId: string): Promise<ReadAnswer> {
    return new Promise((resolve, reject) => {
      let q = this.queues.get(shard.tag);
      if (!q) {
        q = { shard, ids: [], waiters: [] };
        this.queues.set(shard.tag, q);
      }
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
    let recs: (RequestRecord | null)[] | 'missing';
    try {
      recs = await this.scripts.recordReads(q.shard, q.ids);
    } catch (err) {
      for (const w of q.waiters) w.reject(err);
      return;
    }
    if (recs === 'missing') for (const w of q.waiters) w.resolve('missing');
    else for (let i = 0; i < q.waiters.length; i++) q.waiters[i]!.resolve(recs[i] ?? null);
  }
}
