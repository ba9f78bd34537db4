// Puts back a shard whose key vanished (eviction, lost data) by recovering its whole coupon: a shard cannot
// be rebuilt on its own, because what it may hold depends on every other shard and on what is in flight, read
// at one moment (CouponRecovery pauses the coupon for that). Calls for the same coupon on this instance share
// one recovery; when another instance's recovery is in progress, the call waits a moment and returns so its
// caller tries again (a recovery takes tens of milliseconds; callers' loops bound how long they keep trying).
import { DomainError, unavailable } from './errors.js';
import type { Coupon, CouponRecovery } from './ports.js';

export class ShardReloader {
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly recovery: CouponRecovery,
    private readonly onReload: (couponId: string, shards: number[], units: number) => void = () => {},
  ) {}

  reload(coupon: Coupon, index: number): Promise<void> {
    let p = this.running.get(coupon.id);
    if (!p) {
      p = this.load(coupon, index).finally(() => this.running.delete(coupon.id));
      this.running.set(coupon.id, p);
    }
    return p;
  }

  private async load(coupon: Coupon, index: number): Promise<void> {
    const r = await this.recovery.recover(coupon.id, `shard ${index} found missing`).catch((err: unknown) => {
      // Whatever failed (Redis, JetStream, MySQL), the caller may retry with the same request id.
      throw err instanceof DomainError
        ? err
        : unavailable(`coupon ${coupon.id} could not be recovered yet; retry with the same request_id`, err);
    });
    if (r.kind === 'busy') {
      await new Promise((resolve) => setTimeout(resolve, Math.min(r.retryAfterMs, 200)));
      return;
    }
    if (r.report.rebuiltShards.length > 0) this.onReload(coupon.id, r.report.rebuiltShards, r.report.loadedUnits);
  }
}
