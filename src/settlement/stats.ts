// Plain counters and gauges of the settlement pipeline, updated in place by the relay, the settler and the
// reconciler; a metrics exporter reads them (no metrics library here).

export interface RelayStats {
  /** Events JetStream stored (new) since start. */
  published: number;
  /** Publishes JetStream recognised as repeats of an event it already had (dedupe window). */
  duplicates: number;
  publishFailures: number;
  /** Entries taken over from other consumers (dead instances) by XAUTOCLAIM. */
  claimed: number;
  /** Outbox entries per shard (`<couponId>#<index>`), refreshed by the relay's sweep. */
  backlogByShard: Map<string, number>;
  backlogTotal: number;
  /** Age of the oldest outbox entry of the shards this instance relays, ms (0 when empty). */
  lagMs: number;
}

export interface SettleStats {
  /** Ledger rows written. */
  applied: number;
  /** Messages that were already settled (redelivery, republish). */
  duplicates: number;
  /** Deductions held back (the remaining could not cover them yet) and compensations waiting for their deduction. */
  deferred: number;
  /** Deductions refused (anomaly rows written, units returned to Redis). */
  refused: number;
  /** Units of refused deductions: sold beyond the record (oversold). */
  oversoldUnits: number;
  /** Poison messages recorded as anomalies after their redeliveries. */
  poison: number;
  /** All anomaly rows this instance wrote. */
  anomalies: number;
  batches: number;
  /** Batches the fast path settled whole (settle/fast-settle.ts). */
  fastBatches: number;
  /** Fast-path COMMITs that got no answer: the batch was settled again through the careful path. */
  unknownOutcomes: number;
  failedBatches: number;
  optimisticRetries: number;
  /** Age of the newest event settled, ms (now - occurredAt). */
  lagMs: number;
  /** Unsettled messages in the stream (refreshed periodically). */
  jetstreamPending: number;
  /** Age of the oldest unsettled message in the stream, ms (0 when none; refreshed periodically). */
  oldestUnsettledMs: number;
}

export interface DriftReport {
  ledgerDrift: number;
  redisDrift: number;
  /** Runs in a row this coupon was inconsistent. */
  consecutive: number;
  checkedAt: Date;
}

export interface ReconcileStats {
  runs: number;
  /** Coupons whose drift persisted over the threshold at the last run. */
  persistentDrift: number;
  lastDrift: Map<string, DriftReport>;
}

export interface SettlementStats {
  relay: RelayStats;
  settle: SettleStats;
  reconcile: ReconcileStats;
}

export function newSettlementStats(): SettlementStats {
  return {
    relay: { published: 0, duplicates: 0, publishFailures: 0, claimed: 0, backlogByShard: new Map(), backlogTotal: 0, lagMs: 0 },
    settle: {
      applied: 0,
      duplicates: 0,
      deferred: 0,
      refused: 0,
      oversoldUnits: 0,
      poison: 0,
      anomalies: 0,
      batches: 0,
      fastBatches: 0,
      unknownOutcomes: 0,
      failedBatches: 0,
      optimisticRetries: 0,
      lagMs: 0,
      jetstreamPending: 0,
      oldestUnsettledMs: 0,
    },
    reconcile: { runs: 0, persistentDrift: 0, lastDrift: new Map() },
  };
}
