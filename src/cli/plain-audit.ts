// Audit API answers as plain JSON-friendly objects for --json (numbers, lowercase names, ISO timestamps).
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import { DeductionState, LedgerKind, type Anomaly, type GetDeductionResponse, type LedgerEntry } from '../gen/inventory/v1/inventory_pb.js';

const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);
const kind = (k: LedgerKind) => LedgerKind[k] ?? `unknown(${k})`;

export function plainLedgerEntry(e: LedgerEntry) {
  return {
    id: Number(e.id),
    kind: kind(e.kind),
    requestId: e.requestId,
    quantity: Number(e.quantity),
    userId: e.userId,
    shard: e.shard,
    reason: e.reason,
    occurredAt: iso(e.occurredAt),
    settledAt: iso(e.settledAt),
  };
}

export function plainAnomaly(a: Anomaly) {
  return {
    id: Number(a.id),
    couponId: a.couponId,
    requestId: a.requestId,
    kind: kind(a.kind),
    quantity: Number(a.quantity),
    shard: a.shard,
    reason: a.reason,
    detail: a.detail,
    refunded: a.refunded,
    createdAt: iso(a.createdAt),
  };
}

export function plainDeduction(r: GetDeductionResponse) {
  return {
    couponId: r.couponId,
    requestId: r.requestId,
    state: (DeductionState[r.state] ?? `unknown(${r.state})`).toLowerCase(),
    settled: r.settled,
    redis: r.redis
      ? {
          shard: r.redis.shard,
          userId: r.redis.userId,
          quantity: Number(r.redis.quantity),
          remaining: Number(r.redis.remaining),
          compensated: r.redis.compensated,
          refused: r.redis.refused,
          deductedAt: iso(r.redis.deductedAt),
        }
      : null,
    inFlight: r.inFlight.map((e) => ({
      kind: kind(e.kind),
      quantity: Number(e.quantity),
      seenIn: e.seenIn,
      occurredAt: iso(e.occurredAt),
    })),
    ledger: r.ledger.map(plainLedgerEntry),
    anomalies: r.anomalies.map(plainAnomaly),
    checkedAt: iso(r.checkedAt),
  };
}
