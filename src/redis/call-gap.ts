// Group commit under load: how long a master's next call waits after its previous one is back
// (SHARDSTOCK_SHARD_BATCH_GAP_US). Most of a call's Redis CPU is per call and per shard (replication, the WAIT
// round, each shard's reads and writes), not per request, so fewer, larger calls cost Redis less per deduction.
//
// Whether to wait is decided from the rate requests arrive at for the master, not from the size of the call
// that just came back: a call's size grows with the gap itself, so "the last call was large" would keep the
// gap on at rates where calls without it would be small and fast, and every request there would pay up to the
// gap in latency for nothing. The estimate of the next call without a gap is rate × the call's round trip;
// only when that already reaches `from` requests does the gap hold the next call.

export interface GapInput {
  /** Requests in the call that just came back. */
  size: number;
  /** ms between the previous call's send and this one's (undefined: the first call, nothing to go by). */
  sinceLastMs: number | undefined;
  /** ms from this call's send to its return. */
  roundTripMs: number;
  gapMs: number;
  from: number;
}

/** ms to hold the master's next call after this one returned; 0 = send it at once. */
export function holdAfter(c: GapInput): number {
  if (c.gapMs < 1 || c.sinceLastMs === undefined || c.sinceLastMs <= 0) return 0;
  const perMs = c.size / c.sinceLastMs;
  if (perMs * c.roundTripMs < c.from) return 0;
  const wait = c.gapMs - c.roundTripMs;
  // Timers have 1 ms resolution: a shorter wait only costs a timer.
  return wait < 1 ? 0 : wait;
}

/** The gap for each master of one batcher. */
export class CallGap {
  private readonly lastSent = new Map<string, number>();

  constructor(
    private readonly gapMs: number,
    private readonly from: number,
  ) {}

  /** At a call's send: returns what to do with the master's turn once the call is back. */
  sent(master: string, size: number): (free: () => void) => void {
    if (this.gapMs < 1) return (free) => free();
    const at = performance.now();
    const last = this.lastSent.get(master);
    this.lastSent.set(master, at);
    return (free) => {
      const wait = holdAfter({
        size,
        sinceLastMs: last === undefined ? undefined : at - last,
        roundTripMs: performance.now() - at,
        gapMs: this.gapMs,
        from: this.from,
      });
      if (wait === 0) free();
      else setTimeout(free, wait);
    };
  }
}
