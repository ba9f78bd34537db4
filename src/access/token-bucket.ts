// Per-caller token buckets: `ratePerSec` calls per second sustained, bursts up to `burst`. The table is
// bounded so a flood of distinct callers (spoofed peers, many tokens) cannot grow it without limit.
interface Bucket {
  tokens: number;
  at: number;
}

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly ratePerSec: number,
    private readonly burst: number,
    private readonly maxCallers = 100_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes one token for `caller`: 0 when granted, else the milliseconds until one will be there. */
  take(caller: string): number {
    const now = this.now();
    let b = this.buckets.get(caller);
    if (b) {
      b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) * this.ratePerSec) / 1000);
      b.at = now;
      // Re-insert: Map order becomes least-recently-used first.
      this.buckets.delete(caller);
    } else {
      b = { tokens: this.burst, at: now };
      if (this.buckets.size >= this.maxCallers) this.evict();
    }
    this.buckets.set(caller, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - b.tokens) * 1000) / this.ratePerSec);
  }

  get callers(): number {
    return this.buckets.size;
  }

  private evict(): void {
    // Least recently used first; dropping a bucket only forgives that caller's debt.
    const keep = Math.floor(this.maxCallers * 0.9);
    for (const k of this.buckets.keys()) {
      if (this.buckets.size <= keep) break;
      this.buckets.delete(k);
    }
  }
}
