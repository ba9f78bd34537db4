// Settlement gauges, read at scrape time from whatever the settlement side (src/settlement) can tell: the
// figures come through one function so that side owns how they are measured (XLEN/XPENDING of the outbox
// streams, JetStream consumer info, the last reconcile) and this side only names and exports them.
import { Gauge } from 'prom-client';
import type { Metrics } from './metrics.js';

export interface SettlementFigures {
  /** Outbox events in Redis not relayed to JetStream yet (all shards). */
  outboxBacklog: number;
  /** Age in seconds of the oldest outbox event not relayed yet; 0 when none. */
  relayLagSeconds: number;
  /** Age in seconds of the oldest event relayed but not settled in MySQL yet; 0 when none. */
  settleLagSeconds: number;
  /** Messages of the settlement consumer not acknowledged yet. */
  jetstreamPending: number;
  /** Units MySQL+in-flight and Redis disagree by, summed over coupons, at the last reconcile. */
  reconcileDriftUnits: number;
  /** Coupons found inconsistent at the last reconcile. */
  reconcileInconsistent: number;
  /** Units of deductions settlement refused since start: sold beyond MySQL's record (oversold). */
  oversoldUnits: number;
  /** Settlement batches the fast path settled whole since start; the others took the careful path. */
  settleFastBatches: number;
  /** Fast-path COMMITs that got no answer since start (each batch was settled again through the careful path). */
  settleUnknownCommits: number;
  /** Coupon recoveries and repairs this instance ran since start, and what they changed in Redis. */
  recoveries: number;
  recoveryRebuiltShards: number;
  recoveryLoadedUnits: number;
  recoveryLoweredUnits: number;
  recoveryRestoredUnits: number;
  /** How long the coupon was paused by this instance's last recovery. */
  recoveryLastPausedSeconds: number;
}

const GAUGES: Record<keyof SettlementFigures, [string, string]> = {
  outboxBacklog: ['shardstock_outbox_backlog', 'Outbox events in Redis not relayed to JetStream yet'],
  relayLagSeconds: ['shardstock_relay_lag_seconds', 'Age of the oldest outbox event not relayed yet'],
  settleLagSeconds: ['shardstock_settle_lag_seconds', 'Age of the oldest relayed event not settled in MySQL yet'],
  jetstreamPending: ['shardstock_jetstream_pending', 'Settlement consumer messages not acknowledged yet'],
  reconcileDriftUnits: [
    'shardstock_reconcile_drift_units',
    'Units by which Redis and MySQL plus in-flight events disagree, at the last reconcile',
  ],
  reconcileInconsistent: ['shardstock_reconcile_inconsistent_coupons', 'Coupons found inconsistent at the last reconcile'],
  oversoldUnits: ['shardstock_oversold_units', 'Units of deductions settlement refused since start (sold beyond the MySQL record)'],
  settleFastBatches: ['shardstock_settle_fast_batches', 'Settlement batches the fast path settled whole since start'],
  settleUnknownCommits: [
    'shardstock_settle_unknown_commits',
    'Fast-path settlement COMMITs with no answer since start (settled again through the careful path)',
  ],
  recoveries: ['shardstock_recoveries', 'Coupon recoveries and repairs run by this instance since start'],
  recoveryRebuiltShards: ['shardstock_recovery_rebuilt_shards', 'Lost shards rebuilt by this instance since start'],
  recoveryLoadedUnits: ['shardstock_recovery_loaded_units', 'Units put into rebuilt shards by this instance since start'],
  recoveryLoweredUnits: [
    'shardstock_recovery_lowered_units',
    'Surplus units taken out of Redis by recoveries of this instance since start',
  ],
  recoveryRestoredUnits: ['shardstock_recovery_restored_units', 'Lost units given back to Redis by repairs of this instance since start'],
  recoveryLastPausedSeconds: ['shardstock_recovery_last_paused_seconds', 'How long the last recovery of this instance paused its coupon'],
};

/** Registers the settlement gauges; `read` is called at most once per scrape (fields it leaves out read 0). */
export function attachSettlementMetrics(
  metrics: Metrics,
  read: () => Partial<SettlementFigures> | Promise<Partial<SettlementFigures>>,
): void {
  let scrape: { at: number; figures: Promise<Partial<SettlementFigures>> } | undefined;
  const figures = () => {
    if (!scrape || Date.now() - scrape.at > 500)
      scrape = {
        at: Date.now(),
        figures: Promise.resolve()
          .then(read)
          .catch(() => ({})),
      };
    return scrape.figures;
  };
  for (const [key, [name, help]] of Object.entries(GAUGES) as [keyof SettlementFigures, [string, string]][]) {
    new Gauge({
      name,
      help,
      registers: [metrics.registry],
      async collect() {
        this.set((await figures())[key] ?? 0);
      },
    });
  }
}
