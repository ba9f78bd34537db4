// Sale settings between the domain and the protobuf messages: SaleState out, Timestamps in.
import { create } from '@bufbuild/protobuf';
import { timestampFromMs, type Timestamp } from '@bufbuild/protobuf/wkt';
import { SaleStateSchema, SaleStatus, type SaleState } from '../gen/inventory/v1/inventory_pb.js';
import type { SaleView } from '../domain/model.js';
import type { SaleStatus as DomainSaleStatus } from '../domain/sale.js';
import type { Instant } from '../domain/sale.js';

const STATUS: Record<DomainSaleStatus, SaleStatus> = {
  open: SaleStatus.OPEN,
  not_started: SaleStatus.NOT_STARTED,
  ended: SaleStatus.ENDED,
  paused: SaleStatus.PAUSED,
};

export function saleMessage(s: SaleView | undefined): SaleState | undefined {
  if (!s) return undefined;
  return create(SaleStateSchema, {
    startsAt: s.startsAt === null ? undefined : timestampFromMs(s.startsAt),
    endsAt: s.endsAt === null ? undefined : timestampFromMs(s.endsAt),
    paused: s.paused,
    status: STATUS[s.status],
  });
}

/** A request's Timestamp as the domain takes it (validated there, naming the field). */
export const instantOf = (t: Timestamp | undefined): Instant => (t ? { seconds: t.seconds, nanos: t.nanos } : undefined);
