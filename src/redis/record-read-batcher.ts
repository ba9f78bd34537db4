// The sold-out fast path reads one request record per refusal (a replay that did deduct must still get its
// DEDUCTED). Reads bound for the same shard in the same event-loop turn share one record-read-4.lua call: in a
// sold-out storm every call in flight refuses, and one client command per refusal would cost more than the
// refusal itself (the cluster client's per-command work, not Redis, is the bill). A read writes nothing, so a
// batch has no semantics to keep but each request's own answer; a failed call fails its batch's reads alike.
import type { ShardRef } from '../domain/ports.js';
import type { RequestRecord } from './request-record.js';
import type { Scripts } from './scripts.js';

interface Waiter {
  resolve(r: RequestRecord | null | 'missing'): void;
  reject(err: unknown): void;
}

interface Queue {
  shard: ShardRef;
  ids: string[];
  waiters: Waiter[];
}

export class RecordReadBatcher {
  private queues = new Map<string, Queue>();
  private scheduled = false;
  private readonly flushNow = () => this.flush();

  constructor(
    private readonly scripts: Scripts,
    /** Most reads per call; a full batch is sent at once. */
    private readonly max: number,
    /** Every batch's size, as sent. */
    private readonly onBatch?: (size: number) => void,
  ) {}

  /** 'missing': the shard hash is gone, and its records with it. */
  read(shard: ShardRef, requestId: string): Promise<RequestRecord | null | 'missing'> {
    return new Promise((resolve, reject) => {
      let q = this.queues.get(shard.tag);
      if (!q) {
        q = { shard, ids: [], waiters: [] };
        this.queues.set(shard.tag, q);
      }
      q.ids.push(requestId);
      q.waiters.push({ resolve, reject });
      if (q.ids.length >= this.max) {
        this.queues.delete(shard.tag);
        void this.send(q);
        return;
      }
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flushNow);
      }
    });
  }

  /** Every shard's batch in the same tick: auto-pipelining puts those bound for one master into one write. */
  private flush(): void {
    this.scheduled = false;
    const queues = this.queues;
    this.queues = new Map();
    for (const q of queues.values()) void this.send(q);
  }

  private async send(q: Queue): Promise<void> {
    this.onBatch?.(q.ids.length);
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
