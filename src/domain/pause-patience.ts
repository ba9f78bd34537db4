// How long a call waits out a coupon's recovery pause before it answers UNAVAILABLE with a retry-after.
import { DomainError } from './errors.js';

/** A recovery usually ends within tens of milliseconds; a call that outwaits this budget hands the wait to its
 * caller instead of holding a connection. */
export const PAUSE_PATIENCE_MS = 500;

export function paused(couponId: string, waitMs: number): DomainError {
  return new DomainError('unavailable', `coupon ${couponId} is paused while its stock is recovered; retry with the same request_id`, {
    retryAfterMs: Math.max(50, Math.min(waitMs, 1000)),
  });
}

/** One call's budget of waiting on pauses, spent in steps of at most 50 ms. */
export class PausePatience {
  private spent = 0;

  constructor(private readonly couponId: string) {}

  /** Sleeps through one more slice of the pause, or throws UNAVAILABLE once the budget is spent. */
  async wait(waitMs: number): Promise<void> {
    if (this.spent >= PAUSE_PATIENCE_MS) throw paused(this.couponId, waitMs);
    const step = Math.min(waitMs, 50);
    this.spent += step;
    await new Promise((res) => setTimeout(res, step));
  }
}
