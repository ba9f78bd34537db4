// Runs requested repairs in the background, one at a time per coupon and at most once per interval: a burst
// of refusals (each meaning Redis held more than the bound) asks many times and needs one repair.
import type { CouponRecovery } from '../domain/ports.js';
import type { Logger } from '../util/logger.js';

export class RepairScheduler {
  private readonly pending = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly running = new Set<string>();
  private stopped = false;

  constructor(
    private readonly recovery: CouponRecovery,
    private readonly delayMs = 500,
    private readonly log?: Logger,
  ) {}

  request(couponId: string, why: string): void {
    if (this.stopped || this.pending.has(couponId)) return;
    const t = setTimeout(() => {
      this.pending.delete(couponId);
      if (this.running.has(couponId)) return this.request(couponId, why);
      this.running.add(couponId);
      this.recovery
        .recover(couponId, why)
        .then((r) => {
          // Another instance holds the coupon: it may be a rebuild that ignores the surplus; ask again.
          if (r.kind === 'busy') this.request(couponId, why);
        })
        .catch((err) =>
          this.log?.warn({ couponId, err: (err as Error)?.message }, 'repair failed; asked again at the next refusal or reconcile'),
        )
        .finally(() => this.running.delete(couponId));
    }, this.delayMs);
    t.unref?.();
    this.pending.set(couponId, t);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.pending.values()) clearTimeout(t);
    this.pending.clear();
  }
}
