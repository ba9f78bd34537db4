// The audit API's records as protobuf messages, and the ledger kinds both ways.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate, timestampFromMs } from '@bufbuild/protobuf/wkt';
import {
  AnomalySchema,
  DeductionState,
  GetDeductionResponseSchema,
  LedgerEntrySchema,
  LedgerKind,
  type Anomaly,
  type GetDeductionResponse,
  type LedgerEntry,
} from '../gen/inventory/v1/inventory_pb.js';
import type { AnomalyRecord, DeductionView, LedgerRecord } from '../audit/audit-service.js';
import { LedgerKinds, type LedgerKind as DbLedgerKind } from '../db/entities.js';
import { invalid } from '../domain/errors.js';

const kindMessage = (k: string): LedgerKind => LedgerKind[k as keyof typeof LedgerKind] ?? LedgerKind.UNSPECIFIED;

/** The requested kinds as ledger column values; an unknown or unspecified one names the field. */
export function ledgerKinds(kinds: LedgerKind[]): DbLedgerKind[] {
  return kinds.map((k) => {
    const name = LedgerKind[k] as DbLedgerKind | undefined;
    if (!name || !(LedgerKinds as readonly string[]).includes(name)) throw invalid('kinds', `${k} is not a ledger kind`);
    return name;
  });
}

export function ledgerEntryMessage(r: LedgerRecord): LedgerEntry {
  return create(LedgerEntrySchema, {
    id: BigInt(r.id),
    couponId: r.couponId,
    requestId: r.requestId,
    kind: kindMessage(r.kind),
    quantity: BigInt(r.quantity),
    userId: r.userId,
    shard: r.shard,
    reason: r.reason,
    occurredAt: timestampFromMs(r.occurredAt),
    settledAt: timestampFromDate(r.settledAt),
  });
}

export function anomalyMessage(a: AnomalyRecord): Anomaly {
  return create(AnomalySchema, {
    id: BigInt(a.id),
    eventId: a.eventId,
    couponId: a.couponId,
    requestId: a.requestId,
    kind: kindMessage(a.kind),
    quantity: BigInt(a.quantity),
    shard: a.shard,
    reason: a.reason,
    detail: a.detail,
    refunded: a.refunded,
    createdAt: timestampFromDate(a.createdAt),
  });
}

const STATES: Record<DeductionView['state'], DeductionState> = {
  none: DeductionState.NONE,
  deducted: DeductionState.DEDUCTED,
  compensated: DeductionState.COMPENSATED,
  refused: DeductionState.REFUSED,
};

export function deductionMessage(v: DeductionView): GetDeductionResponse {
  return create(GetDeductionResponseSchema, {
    couponId: v.couponId,
    requestId: v.requestId,
    state: STATES[v.state],
    settled: v.settled,
    redis: v.redis
      ? {
          shard: v.redis.shard,
          userId: v.redis.userId,
          quantity: BigInt(v.redis.quantity),
          remaining: BigInt(v.redis.remaining),
          compensated: v.redis.compensated,
          refused: v.redis.refused,
          deductedAt: v.redis.deductedAt === null ? undefined : timestampFromMs(v.redis.deductedAt),
        }
      : undefined,
    inFlight: v.inFlight.map((e) => ({
      kind: kindMessage(e.kind),
      quantity: BigInt(e.quantity),
      seenIn: e.seenIn,
      occurredAt: timestampFromMs(e.occurredAt),
    })),
    ledger: v.ledger.map(ledgerEntryMessage),
    anomalies: v.anomalies.map(anomalyMessage),
    checkedAt: timestampFromDate(v.checkedAt),
  });
}
