// At most one log line per key per interval; the next line that gets through says how many were held back.
// For failures that come in storms by nature (every call during a Redis failover answers UNAVAILABLE): the
// first says what happened, the rest are counted on /metrics, not written one line per call.
export class LogThrottle {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly intervalMs: number,
    private readonly maxKeys = 1000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The number of lines held back since the last one for this key, or undefined to stay quiet. */
  take(key: string): number | undefined {
    const now = this.now();
    const entry = this.last.get(key);
    if (entry && now - entry.at < this.intervalMs) {
      entry.suppressed++;
      return undefined;
    }
    if (!entry && this.last.size >= this.maxKeys) this.last.clear();
    const suppressed = entry?.suppressed ?? 0;
    this.last.set(key, { at: now, suppressed: 0 });
    return suppressed;
  }
}
