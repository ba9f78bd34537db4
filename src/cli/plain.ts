// Proto responses as plain JSON-friendly objects for --json: numbers instead of int64 strings/bigints,
// lowercase outcome names, ISO timestamps. These shapes are the CLI's scripting contract.
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import {
  type CompensateOutcome,
  CompensateOutcomeSchema,
  SaleStatus,
  type SaleState,
  type Coupon,
  type DeductOutcome,
  DeductOutcomeSchema,
  type ReconcileResponse,
  type StockLevel,
} from '../gen/inventory/v1/inventory_pb.js';
import { enumValueName } from '../protocol/enum-names.js';

const n = (v: bigint | number) => Number(v);
const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);

export function plainCoupon(c: Coupon | undefined) {
  return {
    couponId: c?.couponId ?? '',
    totalStock: n(c?.totalStock ?? 0n),
    shardCount: c?.shardCount ?? 0,
    perUserLimit: c?.perUserLimit ?? 0,
    createdAt: iso(c?.createdAt),
    sale: plainSale(c?.sale),
  };
}

const SALE_STATUS_NAMES: Record<SaleStatus, string> = {
  [SaleStatus.UNSPECIFIED]: 'unspecified',
  [SaleStatus.OPEN]: 'open',
  [SaleStatus.NOT_STARTED]: 'not_started',
  [SaleStatus.ENDED]: 'ended',
  [SaleStatus.PAUSED]: 'paused',
};

/** A sale's settings; startsAt/endsAt null = unbounded. An old server sends none: open. */
export function plainSale(s: SaleState | undefined) {
  return {
    status: s ? (SALE_STATUS_NAMES[s.status] ?? `unknown(${s.status})`) : 'open',
    startsAt: iso(s?.startsAt),
    endsAt: iso(s?.endsAt),
    paused: s?.paused ?? false,
  };
}

/** The sale as key/value rows for a terminal. */
export function saleRows(s: ReturnType<typeof plainSale>): [string, string][] {
  return [
    ['sale', s.status],
    ['sale window', `${s.startsAt ?? 'open'} .. ${s.endsAt ?? 'no end'}`],
  ];
}

export type PlainLevel = ReturnType<typeof plainLevel>;

export function plainLevel(l: StockLevel | undefined) {
  return {
    couponId: l?.couponId ?? '',
    totalStock: n(l?.totalStock ?? 0n),
    available: n(l?.available ?? 0n),
    deducted: n(l?.deducted ?? 0n),
    held: n(l?.held ?? 0n),
    settledRemaining: n(l?.settledRemaining ?? 0n),
    pendingSettlement: n(l?.pendingSettlement ?? 0n),
    soldOut: l?.soldOut ?? false,
    shards: (l?.shards ?? []).map((s) => ({ index: s.index, available: n(s.available), inTransit: n(s.inTransit), held: n(s.held) })),
    observedAt: iso(l?.observedAt),
    sale: plainSale(l?.sale),
  };
}

export const deductOutcomeName = (o: DeductOutcome) => enumValueName(DeductOutcomeSchema, o) ?? `unknown(${o})`;
export const compensateOutcomeName = (o: CompensateOutcome) => enumValueName(CompensateOutcomeSchema, o) ?? `unknown(${o})`;

export function plainReconcile(r: ReconcileResponse) {
  return {
    couponId: r.couponId,
    consistent: r.consistent,
    totalStock: n(r.totalStock),
    ledgerDeducted: n(r.ledgerDeducted),
    ledgerCompensated: n(r.ledgerCompensated),
    ledgerRestocked: n(r.ledgerRestocked),
    settledRemaining: n(r.settledRemaining),
    redisAvailable: n(r.redisAvailable),
    redisHeld: n(r.redisHeld),
    redisNetDeducted: n(r.redisNetDeducted),
    inFlightNet: n(r.inFlightNet),
    outboxEvents: n(r.outboxEvents),
    jetstreamPending: n(r.jetstreamPending),
    anomalyUnits: n(r.anomalyUnits),
    anomalies: n(r.anomalies),
    ledgerDrift: n(r.ledgerDrift),
    redisDrift: n(r.redisDrift),
    checkedAt: iso(r.checkedAt),
    repair: r.repair && {
      rebuiltShards: r.repair.rebuiltShards,
      loadedUnits: n(r.repair.loadedUnits),
      loweredUnits: n(r.repair.loweredUnits),
      restoredUnits: n(r.repair.restoredUnits),
      restoredRecords: n(r.repair.restoredRecords),
      bound: n(r.repair.bound),
      pausedMs: n(r.repair.pausedMs),
    },
  };
}
