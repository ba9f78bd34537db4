import type { RecoveryReport } from './ports.js';

// What a reconciliation reports for one coupon (see src/settlement/reconcile/reconciler.ts for how it is computed).
export interface Reconciliation {
  couponId: string;
  totalStock: number;
  ledgerDeducted: number;
  ledgerCompensated: number;
  ledgerRestocked: number;
  settledRemaining: number;
  /** Available + in transit + held: every unit the shards keep out of MySQL's remaining. */
  redisAvailable: number;
  /** Units in open holds (part of redisAvailable). */
  redisHeld?: number;
  redisNetDeducted: number;
  inFlightNet: number;
  outboxEvents: number;
  jetstreamPending: number;
  anomalyUnits: number;
  anomalies: number;
  ledgerDrift: number;
  redisDrift: number;
  consistent: boolean;
  checkedAt: Date;
  /** Present when a repair ran first. */
  repair?: RecoveryReport | undefined;
}
