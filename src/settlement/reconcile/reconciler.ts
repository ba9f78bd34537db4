// Reconcile: puts the record (MySQL), the pipeline (outbox + JetStream) and the live stock (Redis) side by side
// for one coupon and says whether they agree.
//
//   ledgerDrift = settledRemaining - (totalStock - ledgerDeducted + ledgerCompensated)
//                 MySQL's remaining against its own ledger (0 unless someone wrote the table by hand).
//   redisDrift  = redisAvailable - (settledRemaining - inFlightNet)
//                 what Redis holds against what MySQL says is left minus what is still on its way there.
//
// The three systems cannot be read at one instant, so the reads are ordered to make every snapshot artefact
// NEGATIVE (Redis looks lower than its bound, the safe side): MySQL's coupon row first, then Redis and
// JetStream, then MySQL again. Units leave Redis before they leave MySQL (deductions), so the bound takes
// settled deductions from the first read: one settled after it is either still a candidate (excluded from
// in flight by the second read) or already in Redis's lower level — Redis can only look low. Units come back
// to MySQL before or after Redis (restocks, compensations), so the bound takes those from the second read.
// Units moving between shards are in their target's avail from the credit on and in their source's transit
// until the ack; InFlight.snapshot leaves out of transit every move credited by the time all levels were read.
// A move that starts after its source was read and lands before its target is read would be counted twice:
// InFlight.snapshot reads the shards again when a move started during the read (in-flight.ts). A positive
// redisDrift is therefore not a timing artefact; a negative one on a busy coupon is common, and the periodic
// reconciler only complains about drift that persists.
import { DomainError, notFound, unavailable } from '../../domain/errors.js';
import type { Coupon, CouponRecovery, RecoveryReport } from '../../domain/ports.js';
import type { Reconciliation } from '../../domain/reconcile-types.js';
import * as v from '../../domain/validate.js';
import type { Logger } from '../../util/logger.js';
import { InFlight } from './in-flight.js';
import type { LostEvents } from './lost-events.js';
import type { LedgerStore } from '../settle/ledger-store.js';
import type { ReconcileStats } from '../stats.js';

export class Reconciler {
  constructor(
    private readonly ledger: LedgerStore,
    private readonly inFlight: InFlight,
    private readonly recovery?: CouponRecovery,
    private readonly lost?: Pick<LostEvents, 'resend'>,
  ) {}

  /** repair: first send again the events Redis recorded and MySQL never got (lost-events.ts), then bring Redis
   * back to the bound (rebuild, lower a surplus, restore lost units). */
  async reconcile(couponIdRaw: string, options: { repair?: boolean } = {}): Promise<Reconciliation> {
    const couponId = v.couponId(couponIdRaw);
    const coupon = await this.ledger.find(couponId);
    if (!coupon) throw notFound(`coupon ${couponId} does not exist`);
    let repair: RecoveryReport | undefined;
    if (options.repair) {
      if (!this.recovery) throw new DomainError('unimplemented', 'repair is not served by this instance');
      // Before the recovery reads: once on JetStream they count as in flight, not as units to give back.
      await this.lost?.resend(coupon).catch((err: unknown) => {
        throw unavailable(`coupon ${couponId}: lost events could not be sent again; retry the repair`, err);
      });
      const r = await this.recovery.recover(couponId, 'reconcile repair', { restore: true });
      if (r.kind === 'busy') {
        throw new DomainError('unavailable', `coupon ${couponId} is being recovered right now; retry`, { retryAfterMs: r.retryAfterMs });
      }
      repair = r.report;
    }
    const before = await this.ledger.reconcileView(couponId, []);
    if (!before) throw notFound(`coupon ${couponId} does not exist`);
    const snap = await this.inFlight.snapshot(coupon);
    const view = await this.ledger.reconcileView(couponId, InFlight.candidates(snap));
    if (!view) throw notFound(`coupon ${couponId} does not exist`);
    const flight = InFlight.figures(snap, view);
    let redisAvailable = 0;
    let redisNetDeducted = 0;
    let redisHeld = 0;
    for (const l of snap.levels) {
      // Held units are still MySQL's remaining (only a confirmation is a deduction): counted with the shards.
      redisAvailable += (l.available ?? 0) + l.inTransit + (l.held ?? 0);
      redisHeld += l.held ?? 0;
      redisNetDeducted += l.net;
    }
    const { settledRemaining, totalStock } = view.coupon;
    const ledgerDrift = settledRemaining - (totalStock - view.sums.deducted + view.sums.compensated);
    const bound =
      before.coupon.settledRemaining + (view.sums.compensated - before.sums.compensated) + (view.sums.restocked - before.sums.restocked);
    const redisDrift = redisAvailable - (bound - flight.net);
    return {
      couponId,
      totalStock,
      ledgerDeducted: view.sums.deducted,
      ledgerCompensated: view.sums.compensated,
      ledgerRestocked: view.sums.restocked,
      settledRemaining,
      redisAvailable,
      redisHeld,
      redisNetDeducted,
      inFlightNet: flight.net,
      outboxEvents: flight.outboxEvents,
      jetstreamPending: flight.jetstreamPending,
      anomalyUnits: view.anomalyUnits,
      anomalies: view.anomalies,
      ledgerDrift,
      redisDrift,
      consistent: ledgerDrift === 0 && redisDrift === 0,
      checkedAt: new Date(),
      repair,
    };
  }
}

/** Reconciles the coupons this instance serves, remembering each one's drift; drift seen in `threshold` runs
 * in a row is logged (a single inconsistent snapshot of a busy coupon is normal). */
export class PeriodicReconciler {
  constructor(
    private readonly reconciler: Pick<Reconciler, 'reconcile'>,
    private readonly coupons: () => Coupon[],
    private readonly stats: ReconcileStats,
    private readonly threshold = 2,
    private readonly log?: Logger,
  ) {}

  async runOnce(): Promise<void> {
    const seen = new Set<string>();
    let persistent = 0;
    for (const coupon of this.coupons()) {
      seen.add(coupon.id);
      const r = await this.reconciler.reconcile(coupon.id);
      const prev = this.stats.lastDrift.get(coupon.id);
      const consecutive = r.consistent ? 0 : (prev?.consecutive ?? 0) + 1;
      this.stats.lastDrift.set(coupon.id, { ledgerDrift: r.ledgerDrift, redisDrift: r.redisDrift, consecutive, checkedAt: r.checkedAt });
      if (consecutive >= this.threshold) {
        persistent++;
        this.log?.warn(
          {
            couponId: coupon.id,
            ledgerDrift: r.ledgerDrift,
            redisDrift: r.redisDrift,
            runs: consecutive,
            inFlightNet: r.inFlightNet,
            anomalies: r.anomalies,
          },
          'reconcile: drift persists',
        );
      }
    }
    for (const id of this.stats.lastDrift.keys()) if (!seen.has(id)) this.stats.lastDrift.delete(id);
    this.stats.persistentDrift = persistent;
    this.stats.runs++;
  }

  /** The last drift seen per coupon. */
  lastDrift(couponId: string) {
    return this.stats.lastDrift.get(couponId);
  }
}
