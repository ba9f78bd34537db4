// Decides when a changed coupon's shards are probed for the level checks (low-stock, sold-out) and runs
// them on one probe. With thousands of coupons changing, probing every changed coupon every announcement
// would read every shard of every coupon 20 times a second; instead:
//  - urgent: units came back (Compensate, Restock), or the sum of the shard levels this instance has seen
//    (shard-levels.ts) says a check may have crossed its threshold: probed at the next tick;
//  - settle: any other change is probed once, SETTLE_MS after it was first seen, however often the coupon
//    changes meanwhile. Other instances deduct from the same shards, so the levels seen here can be too high
//    by what they took, and a shard never seen here has no level at all; this probe bounds how late a
//    crossing that no estimate saw is caught (and teaches this instance every shard's level);
//  - at most `maxProbesPerTick` probes start per tick (urgent ones first, then settle ones in the order
//    they fell due), and a coupon has at most one check running; whatever is left waits for the next tick,
//    so the probe rate is bounded whatever the number of coupons, and nothing is dropped.
// The checks' marks in Redis (SET NX) still make each event fire once per crossing across instances.
import type { Coupon } from '../domain/ports.js';
import type { ShardLevels } from './shard-levels.js';

export interface LevelCheck {
  /** Whether a level of `estimate` units (possibly too high, see above) may mean a crossing to check now. */
  mayCross(coupon: Coupon, estimate: number): boolean;
  /** The check itself, with the probed units (Σ available + in transit over the shards). */
  run(coupon: Coupon, available: number, returned: boolean): Promise<void>;
}

export interface LevelChecksDeps {
  coupon(couponId: string): Promise<Coupon>;
  /** The coupon if this instance holds it in memory (no MySQL read). */
  peek(couponId: string): Coupon | undefined;
  /** Σ(available + in transit) over the coupon's shards; the probe also refreshes `levels`. */
  probe(coupon: Coupon): Promise<number>;
  levels: ShardLevels;
  checks: readonly LevelCheck[];
  onError(what: string, err: unknown): void;
  tickMs: number;
  settleMs?: number;
  maxProbesPerTick?: number;
  now?: () => number;
}

/** How long after a change a coupon nobody suspected of crossing is probed anyway. */
export const SETTLE_MS = 1000;
/** Probes started per tick at most (a tick is the announcement interval, 50 ms by default). */
export const MAX_PROBES_PER_TICK = 16;

export class LevelChecks {
  /** Probes started (each reads every shard of one coupon once). */
  probes = 0;
  private readonly urgent = new Map<string, boolean>();
  /** couponId -> when to probe it and whether units came back; insertion order is due order. */
  private readonly later = new Map<string, { due: number; returned: boolean }>();
  private readonly running = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly settleMs: number;
  private readonly maxPerTick: number;
  private readonly now: () => number;

  constructor(private readonly d: LevelChecksDeps) {
    this.settleMs = d.settleMs ?? SETTLE_MS;
    this.maxPerTick = d.maxProbesPerTick ?? MAX_PROBES_PER_TICK;
    this.now = d.now ?? Date.now;
  }

  /** A coupon's changes were announced. */
  changed(couponId: string, returned: boolean): void {
    if (this.closed) return;
    if (returned || this.suspect(couponId)) {
      const wasLater = this.later.get(couponId);
      if (wasLater) this.later.delete(couponId);
      this.urgent.set(couponId, returned || wasLater?.returned === true || this.urgent.get(couponId) === true);
    } else if (!this.later.has(couponId) && !this.urgent.has(couponId)) {
      this.later.set(couponId, { due: this.now() + this.settleMs, returned: false });
    }
    this.arm();
  }

  /** Starts this tick's probes (the timer calls it; tests may too). */
  tick(): void {
    this.timer = undefined;
    let budget = this.maxPerTick;
    for (const [couponId, returned] of this.urgent) {
      if (budget === 0) break;
      if (this.running.has(couponId)) continue;
      this.urgent.delete(couponId);
      this.later.delete(couponId);
      this.start(couponId, returned);
      budget--;
    }
    const now = this.now();
    for (const [couponId, e] of this.later) {
      if (budget === 0 || e.due > now) break;
      if (this.running.has(couponId)) continue;
      this.later.delete(couponId);
      this.start(couponId, e.returned);
      budget--;
    }
    this.arm();
  }

  /** Coupons waiting for a probe. */
  get pending(): number {
    return this.urgent.size + this.later.size;
  }

  /** Checks in progress (for tests and shutdown). */
  get busy(): number {
    return this.running.size;
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.urgent.clear();
    this.later.clear();
  }

  private suspect(couponId: string): boolean {
    const coupon = this.d.peek(couponId);
    // Not in memory (evicted): nothing to estimate with; the settle probe looks.
    if (!coupon) return false;
    const estimate = this.d.levels.estimate(couponId, coupon.shardCount);
    if (estimate === undefined) return false;
    for (const c of this.d.checks) if (c.mayCross(coupon, estimate)) return true;
    return false;
  }

  private arm(): void {
    if (this.timer || this.closed || (this.urgent.size === 0 && this.later.size === 0)) return;
    this.timer = setTimeout(() => this.tick(), this.d.tickMs);
    this.timer.unref?.();
  }

  private start(couponId: string, returned: boolean): void {
    this.running.add(couponId);
    this.probes++;
    this.check(couponId, returned)
      .catch((err) => this.d.onError('level check', err))
      .finally(() => this.running.delete(couponId));
  }

  private async check(couponId: string, returned: boolean): Promise<void> {
    const coupon = await this.d.coupon(couponId);
    const available = await this.d.probe(coupon);
    // Each check's failure is its own: the sold-out check still runs when the low-stock mark cannot be set.
    await Promise.all(this.d.checks.map((c) => c.run(coupon, available, returned).catch((err) => this.d.onError('level check', err))));
  }
}
