// Per-coupon lanes for the settler's pipeline: messages are queued by coupon as they arrive, and each coupon
// has at most ONE transaction running at a time, which takes everything queued for it (up to `batch`). Lanes
// of different coupons run in parallel on a small pool.
//
// Why one transaction per coupon at a time: two transactions of one coupon would fight over its version
// (one of them always starts over), and a compensation arriving in one while its deduction commits in the
// other would be deferred for nothing. Serial per coupon, the next transaction sees everything the previous
// committed, so "a compensation after its deduction" holds across batches as it does inside one. While a
// coupon's transaction runs, the next batch of it builds up in its queue: under load the batches grow by
// themselves, at low traffic a message is settled as soon as it arrives (no wait to fill a batch).

export interface LaneOptions {
  /** Most items one transaction takes. */
  batch: number;
  /** Transactions (of different coupons) running at once. */
  concurrency: number;
  /** Items queued or being settled above which the producer waits (`space()`). */
  maxBuffered: number;
}

type Settle<T> = (key: string, items: T[]) => Promise<void>;

export class CouponLanes<T> {
  private readonly queues = new Map<string, T[]>();
  /** Coupons with queued items and no transaction running, oldest first. */
  private ready: string[] = [];
  private readonly busy = new Map<string, T[]>();
  private pumpScheduled = false;
  private waiters: { when: () => boolean; resolve: () => void }[] = [];
  /** Items queued or in a running transaction. */
  buffered = 0;

  constructor(
    private readonly settle: Settle<T>,
    private readonly options: LaneOptions,
  ) {}

  push(key: string, item: T): void {
    let q = this.queues.get(key);
    if (!q) {
      q = [];
      this.queues.set(key, q);
      if (!this.busy.has(key)) this.ready.push(key);
    }
    q.push(item);
    this.buffered++;
    // Deferred to the next turn: the messages that arrived with this one are queued first and go together.
    if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    }
  }

  /** Every item queued or being settled (to keep their deliveries alive). */
  *items(): Iterable<T> {
    for (const q of this.queues.values()) yield* q;
    for (const b of this.busy.values()) yield* b;
  }

  hasSpace(): boolean {
    return this.buffered < this.options.maxBuffered;
  }

  /** Resolves once fewer than maxBuffered items are queued or being settled. */
  space(): Promise<void> {
    return this.until(() => this.buffered < this.options.maxBuffered);
  }

  /** Resolves once nothing is queued or being settled. */
  idle(): Promise<void> {
    return this.until(() => this.buffered === 0);
  }

  private until(when: () => boolean): Promise<void> {
    if (when()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ when, resolve }));
  }

  private pump(): void {
    while (this.busy.size < this.options.concurrency && this.ready.length > 0) {
      const key = this.ready.shift()!;
      const q = this.queues.get(key)!;
      let items: T[];
      if (q.length <= this.options.batch) {
        items = q;
        this.queues.delete(key);
      } else {
        items = q.splice(0, this.options.batch);
        // The rest waits for this transaction: it is not ready until then.
      }
      this.busy.set(key, items);
      void this.settle(key, items)
        .catch(() => {})
        .finally(() => {
          this.busy.delete(key);
          this.buffered -= items.length;
          if (this.queues.has(key)) this.ready.push(key);
          this.wakeWaiters();
          this.pump();
        });
    }
  }

  private wakeWaiters(): void {
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (w.when()) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }
}
