// The audit API's use cases: what happened to one request (GetDeduction) and a coupon's history (ListLedger,
// ListAnomalies). Reads only. GetDeduction reads Redis first, then what is in flight, then MySQL — the way an
// event travels — so an event moving along the pipeline while it is looked up is seen at least once.
import { invalid, unavailable } from '../domain/errors.js';
import type { Coupon, ShardRef } from '../domain/ports.js';
import { claimShard, homeShard, shardRef } from '../domain/routing.js';
import * as v from '../domain/validate.js';
import type { LedgerKind } from '../db/entities.js';
import { ANOMALY } from '../settlement/settle/ledger-store.js';
import type { SettlementEvent } from '../settlement/event.js';
import { decodePageToken, encodePageToken, pageSize } from './page-token.js';

export interface LedgerRecord {
  id: number;
  couponId: string;
  requestId: string;
  kind: LedgerKind;
  quantity: number;
  userId: string;
  /** -1: not tied to a shard. */
  shard: number;
  reason: string;
  /** ms since epoch */
  occurredAt: number;
  settledAt: Date;
}

export interface AnomalyRecord {
  id: number;
  eventId: string;
  couponId: string;
  requestId: string;
  /** DEDUCT or COMPENSATE ('' when the event could not be read). */
  kind: string;
  quantity: number;
  shard: number;
  reason: string;
  detail: string;
  refunded: boolean;
  createdAt: Date;
}

export interface RequestRecordView {
  shard: number;
  userId: string;
  quantity: number;
  remaining: number;
  compensated: boolean;
  refused: boolean;
  /** ms since epoch; null on records written before the field existed. */
  deductedAt: number | null;
}

export interface LedgerFilter {
  couponId: string;
  kinds: LedgerKind[];
  userId: string | undefined;
  since: number | null;
  until: number | null;
}

export interface AuditRecords {
  ledgerPage(filter: LedgerFilter, afterId: number, limit: number): Promise<LedgerRecord[]>;
  anomalyPage(couponId: string | undefined, afterId: number, limit: number): Promise<AnomalyRecord[]>;
  ofRequest(couponId: string, requestId: string): Promise<{ ledger: LedgerRecord[]; anomalies: AnomalyRecord[] }>;
}

export interface AuditDeps {
  coupon(couponId: string): Promise<Coupon>;
  records: AuditRecords;
  requests: {
    read(shard: ShardRef, requestId: string): Promise<RequestRecordView | null>;
    readClaim(shard: ShardRef, requestId: string): Promise<string | null>;
  };
  /** The coupon's unsettled events (Redis outboxes, then JetStream), by event id. */
  inFlight(coupon: Coupon): Promise<{ outbox: Map<string, SettlementEvent>; jetstream: Map<string, SettlementEvent> }>;
  now?: () => number;
}

export type DeductionState = 'none' | 'deducted' | 'compensated' | 'refused';

export interface InFlightView {
  kind: 'DEDUCT' | 'COMPENSATE';
  quantity: number;
  seenIn: ('outbox' | 'jetstream')[];
  occurredAt: number;
}

export interface DeductionView {
  couponId: string;
  requestId: string;
  state: DeductionState;
  settled: boolean;
  redis: RequestRecordView | null;
  inFlight: InFlightView[];
  ledger: LedgerRecord[];
  anomalies: AnomalyRecord[];
  checkedAt: Date;
}

export interface LedgerQuery {
  couponId: string;
  pageToken: string;
  pageSize: number;
  kinds: LedgerKind[];
  userId: string;
  since: { seconds: bigint; nanos: number } | undefined;
  until: { seconds: bigint; nanos: number } | undefined;
}

/** Pure: one state from every part, the most final fact winning. */
export function deductionState(parts: Pick<DeductionView, 'redis' | 'inFlight' | 'ledger' | 'anomalies'>): DeductionState {
  if (parts.redis?.refused || parts.anomalies.some((a) => a.kind === 'DEDUCT' && a.reason === ANOMALY.refused)) return 'refused';
  if (parts.redis?.compensated || parts.ledger.some((l) => l.kind === 'COMPENSATE') || parts.inFlight.some((e) => e.kind === 'COMPENSATE'))
    return 'compensated';
  if (parts.redis || parts.ledger.some((l) => l.kind === 'DEDUCT') || parts.inFlight.some((e) => e.kind === 'DEDUCT')) return 'deducted';
  return 'none';
}

export class AuditService {
  constructor(private readonly d: AuditDeps) {}

  async deduction(input: { couponId: string; requestId: string }): Promise<DeductionView> {
    const couponId = v.couponId(input.couponId);
    const requestId = v.requestId(input.requestId);
    const coupon = await this.d.coupon(couponId);
    const redis = await this.record(coupon, requestId);
    const { outbox, jetstream } = await this.d.inFlight(coupon).catch((err: unknown) => {
      throw unavailable(`the events in flight for coupon ${couponId} cannot be read now; retry`, err);
    });
    const inFlight: InFlightView[] = [];
    for (const kind of ['D', 'C'] as const) {
      const id = `${kind}:${couponId}:${requestId}`;
      const e = outbox.get(id) ?? jetstream.get(id);
      if (!e) continue;
      inFlight.push({
        kind: kind === 'D' ? 'DEDUCT' : 'COMPENSATE',
        quantity: e.quantity,
        seenIn: [...(outbox.has(id) ? (['outbox'] as const) : []), ...(jetstream.has(id) ? (['jetstream'] as const) : [])],
        occurredAt: e.occurredAt,
      });
    }
    const { ledger, anomalies } = await this.d.records.ofRequest(couponId, requestId);
    // Settled: in the ledger, and not also still travelling (the ledger row commits before the ack).
    const parts = { redis, inFlight, ledger, anomalies };
    return {
      couponId,
      requestId,
      state: deductionState(parts),
      settled: ledger.some((l) => l.kind === 'DEDUCT'),
      ...parts,
      checkedAt: new Date(this.d.now?.() ?? Date.now()),
    };
  }

  async ledger(q: LedgerQuery): Promise<{ entries: LedgerRecord[]; nextPageToken: string }> {
    const couponId = v.couponId(q.couponId);
    const afterId = decodePageToken(q.pageToken);
    const size = pageSize(q.pageSize);
    const userId = v.optionalId('user_id', q.userId, v.USER_ID_MAX);
    const since = v.instant('since', q.since);
    const until = v.instant('until', q.until);
    if (since !== null && until !== null && until <= since) throw invalid('until', 'must be after since');
    await this.d.coupon(couponId);
    const rows = await this.d.records.ledgerPage({ couponId, kinds: q.kinds, userId, since, until }, afterId, size + 1);
    return page(rows, size, (entries) => ({ entries }));
  }

  async anomalies(q: {
    couponId: string;
    pageToken: string;
    pageSize: number;
  }): Promise<{ anomalies: AnomalyRecord[]; nextPageToken: string }> {
    const couponId = q.couponId === '' ? undefined : v.couponId(q.couponId);
    const afterId = decodePageToken(q.pageToken);
    const size = pageSize(q.pageSize);
    const rows = await this.d.records.anomalyPage(couponId, afterId, size + 1);
    return page(rows, size, (anomalies) => ({ anomalies }));
  }

  /** The request's record: on the request's home shard, or for a limited coupon on its user's shard (the
   * claim on the request's own shard says which user). */
  private async record(coupon: Coupon, requestId: string): Promise<RequestRecordView | null> {
    let userId = '';
    if (coupon.perUserLimit > 0) {
      const claim = await this.d.requests.readClaim(shardRef(coupon, claimShard(coupon, requestId)), requestId);
      if (claim === null) return null;
      userId = claim.split('|')[0]!;
    }
    return this.d.requests.read(shardRef(coupon, homeShard(coupon, requestId, userId)), requestId);
  }
}

/** Fetched one row more than the page: its presence says whether there is a next page. */
function page<R extends { id: number }, T>(rows: R[], size: number, wrap: (rows: R[]) => T): T & { nextPageToken: string } {
  const more = rows.length > size;
  const kept = more ? rows.slice(0, size) : rows;
  return { ...wrap(kept), nextPageToken: more ? encodePageToken(kept[kept.length - 1]!.id) : '' };
}
