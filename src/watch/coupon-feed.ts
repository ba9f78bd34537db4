// One coupon's levels on one instance, shared by all of its local WatchStock streams: one NATS subscription,
// at most one level read in flight and at most one read per floor interval however many pings arrive, each
// new level offered to every stream's slot. It also re-reads on its own now and then: often while settlement
// is behind (MySQL moves without a ping), rarely otherwise (a lost ping heals).
import type { StockLevel } from '../domain/model.js';
import type { LevelSlot } from './level-slot.js';

export interface FeedTiming {
  /** Least time between two reads. */
  floorMs: number;
  /** Re-read this often while some units are not settled yet, or after a failed read. */
  settleRefreshMs: number;
  /** Re-read this often otherwise. */
  heartbeatMs: number;
}

/** What makes two levels different to a watcher (observedAt aside). */
export function levelSignature(l: StockLevel): string {
  let s = `${l.totalStock}|${l.available}|${l.deducted}|${l.settledRemaining}|${l.pendingSettlement}|`;
  s += `${l.held ?? 0}|`;
  for (const sh of l.shards) s += `${sh.available}:${sh.inTransit}:${sh.held ?? 0},`;
  if (l.sale) s += `|${l.sale.status}:${l.sale.startsAt}:${l.sale.endsAt}`;
  return s;
}

export class CouponFeed {
  readonly slots = new Set<LevelSlot>();
  private level: StockLevel | undefined;
  private sig = '';
  private readAt = 0;
  private reading: Promise<StockLevel> | undefined;
  private failed = false;
  private dirty = false;
  private timer: NodeJS.Timeout | undefined;
  private timerDue = 0;
  private closed = false;
  private readonly unlisten: () => void;

  constructor(
    readonly couponId: string,
    private readonly read: () => Promise<StockLevel>,
    listen: (onChange: () => void) => () => void,
    private readonly timing: FeedTiming,
    private readonly onError: (what: string, err: unknown) => void,
  ) {
    this.unlisten = listen(() => this.changed());
  }

  /** The level for a stream that just started: the last one read if still fresh, else a new read. */
  current(): Promise<StockLevel> {
    if (this.level && !this.dirty && !this.failed && Date.now() - this.readAt < this.timing.floorMs) return Promise.resolve(this.level);
    return this.refresh();
  }

  /** The last level read, if any. */
  get last(): StockLevel | undefined {
    return this.level;
  }

  get hasTimer(): boolean {
    return this.timer !== undefined;
  }

  /** A ping: some instance changed the coupon. */
  changed(): void {
    if (this.closed) return;
    this.dirty = true;
    this.schedule(this.readAt + this.timing.floorMs - Date.now());
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.unlisten();
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.reading) return; // a read in flight reschedules itself when it ends
    const delay = Math.max(0, delayMs);
    const due = Date.now() + delay;
    if (this.timer && this.timerDue <= due) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refresh().catch((err) => this.onError('watch level read', err));
    }, delay);
  }

  private refresh(): Promise<StockLevel> {
    if (this.reading) return this.reading;
    this.dirty = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const reading = this.read().then(
      (level) => {
        this.failed = false;
        this.publish(level);
        return level;
      },
      (err: unknown) => {
        this.failed = true;
        throw err;
      },
    );
    this.reading = reading;
    void reading
      .catch(() => {})
      .finally(() => {
        this.reading = undefined;
        this.readAt = Date.now();
        if (this.closed) return;
        if (this.dirty) this.schedule(this.timing.floorMs);
        else if (this.failed || (this.level?.pendingSettlement ?? 0) > 0) this.schedule(this.timing.settleRefreshMs);
        else this.schedule(this.timing.heartbeatMs);
      });
    return reading;
  }

  private publish(level: StockLevel): void {
    if (this.closed) return;
    this.level = level;
    const sig = levelSignature(level);
    if (sig === this.sig) return;
    this.sig = sig;
    for (const slot of this.slots) slot.offer(level);
  }
}
