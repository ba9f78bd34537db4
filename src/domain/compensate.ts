// Compensate: gives the units of one recorded deduction back to the shard that served it, once.
import { DomainError } from './errors.js';
import type { CompensateInput, Coupon } from './model.js';
import type { StockChanges, StockSignals, StockStore } from './ports.js';
import type { CouponCatalog } from './coupon-catalog.js';
import type { SoldOutCache } from './sold-out-cache.js';
import type { ShardReloader } from './shard-reloader.js';
import { PausePatience } from './pause-patience.js';
import { allShards, claimShard, homeShard, shardRef } from './routing.js';
import * as v from './validate.js';

export type CompensateOutcome = 'compensated' | 'already_compensated' | 'not_deducted';

export class CompensateService {
  constructor(
    private readonly catalog: CouponCatalog,
    private readonly store: StockStore,
    private readonly soldOut: SoldOutCache,
    private readonly signals: StockSignals,
    private readonly reloader: ShardReloader,
    private readonly changes?: StockChanges,
  ) {}

  async compensate(input: CompensateInput, signal?: AbortSignal): Promise<{ outcome: CompensateOutcome; remaining: number }> {
    const couponId = v.couponId(input.couponId);
    const requestId = v.requestId(input.requestId);
    const reason = v.text('reason', input.reason, v.REASON_MAX);
    const coupon = await this.catalog.get(couponId);

    let userId: string | undefined;
    let home: number;
    if (coupon.perUserLimit > 0) {
      // The record lives on the user's shard; the claim on the request's shard says which user.
      const claimRef = shardRef(coupon, claimShard(coupon, requestId));
      let claim = await this.store.readClaim(claimRef, requestId);
      // The claim's shard is gone with its claims: not "never deducted" until the recovery has put them back.
      for (let i = 0; claim === 'missing' && i < 3; i++) {
        await this.reloader.reload(coupon, claimRef.index);
        claim = await this.store.readClaim(claimRef, requestId);
      }
      if (claim === 'missing')
        throw new DomainError('unavailable', `coupon ${couponId} is being recovered; retry with the same request_id`);
      if (claim === null) {
        // The claim lapses when its Deduct's instance died before keeping it: the record, kept for the window
        // on the user's shard, still says whether (and for whom) units were taken.
        const found = await this.findRecord(coupon, requestId);
        if (!found) return { outcome: 'not_deducted', remaining: 0 };
        claim = found;
        // Kept again, so the id stays its user's for the rest of the window.
        await this.store.keepClaim(claimRef, requestId, found);
      }
      userId = claim.split('|')[0]!;
      home = homeShard(coupon, requestId, userId);
    } else {
      home = homeShard(coupon, requestId, '');
    }
    const ref = shardRef(coupon, home);
    let patience: PausePatience | undefined;
    for (let attempt = 0; attempt < 3; ) {
      if (signal?.aborted)
        throw new DomainError('deadline_exceeded', 'the call was cancelled or its deadline passed before it could finish');
      const r = await this.store.compensate(ref, requestId, reason, userId, signal);
      switch (r.kind) {
        case 'compensated':
          this.soldOut.clear(couponId);
          this.signals.stockReturned(couponId);
          this.changes?.changed(couponId, true);
          return { outcome: 'compensated', remaining: r.remaining };
        case 'already':
          return { outcome: 'already_compensated', remaining: r.remaining };
        case 'not_deducted':
          return { outcome: 'not_deducted', remaining: 0 };
        case 'missing':
          attempt++;
          await this.reloader.reload(coupon, home);
          break;
        case 'paused':
          // Waited out as Deduct does: refusing a refund for a pause of milliseconds sends its caller into a retry.
          patience ??= new PausePatience(couponId);
          await patience.wait(r.waitMs);
          break;
      }
    }
    throw new DomainError('unavailable', `shard ${home} of coupon ${couponId} could not be reloaded; retry`);
  }

  /** A limited coupon's deduction found without its claim: every shard is asked (Compensate is rare, and a
   * shard count is small), and only a record on its user's own shard counts. Returns "user|quantity". */
  private async findRecord(coupon: Coupon, requestId: string): Promise<string | null> {
    const found = await Promise.all(
      allShards(coupon).map(async (ref) => {
        let rec = await this.store.readRequest(ref, requestId);
        // A shard that lost its data may have held it: not "never deducted" until it is rebuilt.
        for (let i = 0; rec === 'missing' && i < 3; i++) {
          await this.reloader.reload(coupon, ref.index);
          rec = await this.store.readRequest(ref, requestId);
        }
        if (rec === 'missing')
          throw new DomainError('unavailable', `coupon ${coupon.id} is being recovered; retry with the same request_id`);
        return rec && homeShard(coupon, requestId, rec.userId) === ref.index ? `${rec.userId}|${rec.quantity}` : null;
      }),
    );
    return found.find((f) => f !== null) ?? null;
  }
}
