// Latency histogram with ~1% relative precision from 1 µs to ~100 s: fixed log buckets, so the load
// processes can each fill one and the orchestrator can add them up.

const PER_E = 100; // buckets per factor e: bucket width ~1%
const SIZE = Math.ceil(Math.log(1e8) * PER_E) + 2;

export class Histogram {
  readonly counts: Uint32Array;
  count = 0;
  maxUs = 0;

  constructor(counts?: Uint32Array) {
    this.counts = counts ?? new Uint32Array(SIZE);
    if (counts) for (const c of counts) this.count += c;
  }

  record(us: number): void {
    const i = us <= 1 ? 0 : Math.min(SIZE - 1, Math.ceil(Math.log(us) * PER_E));
    this.counts[i]!++;
    this.count++;
    if (us > this.maxUs) this.maxUs = us;
  }

  add(other: Histogram): void {
    for (let i = 0; i < SIZE; i++) this.counts[i]! += other.counts[i]!;
    this.count += other.count;
    this.maxUs = Math.max(this.maxUs, other.maxUs);
  }

  /** The upper edge of the bucket holding quantile q (0..1), in milliseconds. */
  quantileMs(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < SIZE; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(Math.exp(i / PER_E), this.maxUs || Infinity) / 1000;
    }
    return this.maxUs / 1000;
  }
}
