// The StockChanges port behind Deduct, Compensate and Restock. The hot path only marks the coupon dirty
// (a Map.set, and a timer armed if none is); one timer per instance then announces each dirty coupon once,
// so an instance publishes at most one NATS message per coupon per interval whatever its deduction rate,
// and nothing at all when nothing changes. The announcement can lag a change by one interval, never lose it.
import type { StockChanges } from '../domain/ports.js';

export interface Announcer {
  announce(couponId: string): void;
}

/** Runs after an announcement, off the hot path (low-stock checks). */
export type AfterAnnounce = (couponId: string, returned: boolean) => void;

export class ChangeAnnouncer implements StockChanges {
  /** couponId -> whether any of the changes gave units back */
  private dirty = new Map<string, boolean>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  announced = 0;

  constructor(
    private readonly bus: Announcer,
    private readonly intervalMs: number,
    private readonly after: AfterAnnounce = () => {},
  ) {}

  changed(couponId: string, returned: boolean): void {
    if (this.closed) return;
    if (returned || !this.dirty.has(couponId)) this.dirty.set(couponId, returned || (this.dirty.get(couponId) ?? false));
    this.timer ??= setTimeout(() => this.flush(), this.intervalMs);
  }

  /** Announces every dirty coupon now. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.dirty;
    this.dirty = new Map();
    for (const [couponId, returned] of batch) {
      this.bus.announce(couponId);
      this.announced++;
      this.after(couponId, returned);
    }
  }

  get pending(): number {
    return this.dirty.size;
  }

  close(): void {
    this.flush();
    this.closed = true;
  }
}
