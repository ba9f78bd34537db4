// One check per coupon at a time, however often the coupon changes: a change that arrives while its check
// runs queues exactly one more run when it ends (`returned` or-ed over the queued changes), so a burst of
// deductions costs at most two checks and none is lost. Low-stock and stock events both check this way.
export class CouponChecks {
  private readonly running = new Set<string>();
  /** Coupons changed again while their check ran: checked once more when it ends. */
  private readonly again = new Map<string, boolean>();

  constructor(
    private readonly run: (couponId: string, returned: boolean) => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  check(couponId: string, returned: boolean): void {
    if (this.running.has(couponId)) {
      this.again.set(couponId, returned || (this.again.get(couponId) ?? false));
      return;
    }
    this.running.add(couponId);
    this.run(couponId, returned)
      .catch(this.onError)
      .finally(() => {
        this.running.delete(couponId);
        const next = this.again.get(couponId);
        if (next !== undefined) {
          this.again.delete(couponId);
          this.check(couponId, next);
        }
      });
  }

  /** Checks in progress (for tests and shutdown). */
  get busy(): number {
    return this.running.size;
  }
}
