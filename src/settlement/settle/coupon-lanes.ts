// Per-coupon lanes for the settler's pipeline: messages are queued by coupon as they arrive, and each coupon
// has at most `perCoupon` transactions running at a time, each taking what is queued for it (up to `batch`).
// Lanes of different coupons run in parallel on a small pool (`concurrency` transactions in all).
//
// Why a bound per coupon: transactions of one coupon queue for its row lock at their end (ledger-store.ts),
// and a compensation settled in one while its deduction commits in another is deferred (redelivered later).
// With perCoupon = 1 the next transaction sees everything the previous committed. While a coupon's
// transactions run, its next batch builds up in its queue: under load the batches grow by themselves, at low
// traffic a message is settled as soon as it arrives (no wait to fill a batch).

export interface LaneOptions {
  /** Most items one transaction takes. */
  batch: number;
  /** Transactions running at once, over all coupons. */
  concurrency: number;
  /** Transactions of one coupon running at once. */
  perCoupon: number;
  /** Items queued or being settled above which the producer waits (`space()`). */
  maxBuffered: number;
}

type Settle<T> = (key: string, items: T[]) => Promise<void>;

export class CouponLanes<T> {
  private readonly queues = new Map<string, T[]>();
  /** Coupons with queued items and room for another transaction, oldest first (each at most once). */
  private ready: string[] = [];
  private readonly isReady = new Set<string>();
  /** The batches being settled, per coupon. */
  private readonly busy = new Map<string, Set<T[]>>();
  private running = 0;
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
      this.markReady(key);
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

  private markReady(key: string): void {
    if (this.isReady.has(key) || !this.queues.has(key) || (this.busy.get(key)?.size ?? 0) >= this.options.perCoupon) return;
    this.isReady.add(key);
    this.ready.push(key);
  }

  /** Every item queued or being settled (to keep their deliveries alive). */
  *items(): Iterable<T> {
    for (const q of this.queues.values()) yield* q;
    for (const batches of this.busy.values()) for (const b of batches) yield* b;
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
    while (this.running < this.options.concurrency && this.ready.length > 0) {
      const key = this.ready.shift()!;
      this.isReady.delete(key);
      const q = this.queues.get(key)!;
      let items: T[];
      if (q.length <= this.options.batch) {
        items = q;
        this.queues.delete(key);
      } else {
        items = q.splice(0, this.options.batch);
      }
      let batches = this.busy.get(key);
      if (!batches) {
        batches = new Set();
        this.busy.set(key, batches);
      }
      batches.add(items);
      this.running++;
      this.markReady(key);
      void this.settle(key, items)
        .catch(() => {})
        .finally(() => {
          batches.delete(items);
          if (batches.size === 0) this.busy.delete(key);
          this.running--;
          this.buffered -= items.length;
          this.markReady(key);
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
