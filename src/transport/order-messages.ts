// Orders between the domain (src/domain/orders.ts) and inventory.v1: each order answer as the message of the
// RPC that asked (ReserveOrder, DeductOrder, and the order_id forms of Confirm, Release, ExtendHold, Compensate).
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { HoldRefusal } from '../domain/ports.js';
import type { OrderInput, OrderOutcome as DomainOrderOutcome, OrderResult } from '../domain/orders.js';
import {
  CompensateOutcome,
  CompensateResponseSchema,
  ConfirmOutcome,
  ConfirmResponseSchema,
  DeductOrderResponseSchema,
  ExtendHoldResponseSchema,
  ExtendOutcome,
  ItemRefusalReason,
  ItemRefusalSchema,
  OrderItemResultSchema,
  OrderOutcome,
  ReleaseOutcome,
  ReleaseResponseSchema,
  ReserveOrderResponseSchema,
  type CompensateResponse,
  type ConfirmResponse,
  type DeductOrderRequest,
  type DeductOrderResponse,
  type ExtendHoldResponse,
  type OrderItemResult,
  type ReleaseResponse,
  type ReserveOrderRequest,
  type ReserveOrderResponse,
} from '../gen/inventory/v1/inventory_pb.js';
import { holdMessage } from './handlers.js';

const ORDER_OUTCOMES: Record<DomainOrderOutcome, OrderOutcome> = {
  held: OrderOutcome.RESERVED,
  confirmed: OrderOutcome.DEDUCTED,
  refused: OrderOutcome.REFUSED,
  expired: OrderOutcome.EXPIRED,
  released: OrderOutcome.RELEASED,
  abandoned: OrderOutcome.ABANDONED,
  compensated: OrderOutcome.COMPENSATED,
};

const REFUSALS: Record<HoldRefusal, ItemRefusalReason> = {
  sold_out: ItemRefusalReason.SOLD_OUT,
  insufficient: ItemRefusalReason.INSUFFICIENT,
  user_limit_exceeded: ItemRefusalReason.USER_LIMIT_EXCEEDED,
  not_started: ItemRefusalReason.NOT_STARTED,
  ended: ItemRefusalReason.ENDED,
  sale_paused: ItemRefusalReason.SALE_PAUSED,
};

const ITEM_COMPENSATIONS = {
  compensated: CompensateOutcome.COMPENSATED,
  already_compensated: CompensateOutcome.ALREADY_COMPENSATED,
  not_deducted: CompensateOutcome.NOT_DEDUCTED,
} as const;

export function orderInput(req: ReserveOrderRequest | DeductOrderRequest): OrderInput {
  return {
    requestId: req.requestId,
    userId: req.userId,
    items: req.items.map((i) => ({ couponId: i.couponId, quantity: i.quantity })),
    ttlMs: req.ttlMs,
  };
}

function items(r: OrderResult): OrderItemResult[] {
  return r.items.map((i) =>
    create(OrderItemResultSchema, {
      itemIndex: i.index,
      couponId: i.couponId,
      quantity: BigInt(i.quantity),
      shard: i.hold?.shard ?? 0,
      hold: holdMessage(i.hold),
      compensateOutcome: i.compensated ? ITEM_COMPENSATIONS[i.compensated] : CompensateOutcome.UNSPECIFIED,
    }),
  );
}

function common(r: OrderResult) {
  return {
    orderId: r.orderId,
    outcome: ORDER_OUTCOMES[r.outcome],
    replayed: r.replayed,
    items: items(r),
    refusal: r.refused
      ? create(ItemRefusalSchema, { itemIndex: r.refused.index, couponId: r.refused.couponId, reason: REFUSALS[r.refused.reason] })
      : undefined,
  };
}

export function reserveOrderMessage(r: OrderResult): ReserveOrderResponse {
  return create(ReserveOrderResponseSchema, {
    ...common(r),
    expiresAt: r.expiresAtMs !== undefined ? timestampFromDate(new Date(r.expiresAtMs)) : undefined,
  });
}

export function deductOrderMessage(r: OrderResult): DeductOrderResponse {
  return create(DeductOrderResponseSchema, common(r));
}

/** Confirm on an order: CONFIRMED once every item is deducted; nothing taken answers why (EXPIRED / RELEASED). */
export function confirmOrderMessage(r: OrderResult | null): ConfirmResponse {
  if (!r) return create(ConfirmResponseSchema, { outcome: ConfirmOutcome.NOT_FOUND });
  const outcome =
    r.outcome === 'confirmed' || r.outcome === 'compensated'
      ? ConfirmOutcome.CONFIRMED
      : r.outcome === 'expired' || r.outcome === 'abandoned'
        ? ConfirmOutcome.EXPIRED
        : ConfirmOutcome.RELEASED;
  return create(ConfirmResponseSchema, { outcome, replayed: r.replayed, items: items(r) });
}

export function releaseOrderMessage(r: OrderResult | null): ReleaseResponse {
  if (!r) return create(ReleaseResponseSchema, { outcome: ReleaseOutcome.NOT_FOUND });
  const outcome =
    r.outcome === 'confirmed' || r.outcome === 'compensated'
      ? ReleaseOutcome.CONFIRMED
      : r.outcome === 'expired' || r.outcome === 'abandoned'
        ? ReleaseOutcome.EXPIRED
        : r.outcome === 'released' && !r.replayed
          ? ReleaseOutcome.RELEASED
          : ReleaseOutcome.ALREADY_RELEASED;
  return create(ReleaseResponseSchema, { outcome, items: items(r) });
}

export function extendOrderMessage(r: OrderResult | null): ExtendHoldResponse {
  if (!r) return create(ExtendHoldResponseSchema, { outcome: ExtendOutcome.NOT_FOUND });
  const outcome =
    r.outcome === 'held'
      ? ExtendOutcome.EXTENDED
      : r.outcome === 'confirmed' || r.outcome === 'compensated'
        ? ExtendOutcome.CONFIRMED
        : r.outcome === 'expired' || r.outcome === 'abandoned'
          ? ExtendOutcome.EXPIRED
          : ExtendOutcome.RELEASED;
  return create(ExtendHoldResponseSchema, { outcome, items: items(r) });
}

export function compensateOrderMessage(r: (OrderResult & { already: boolean }) | null): CompensateResponse {
  // No record is not "nothing was deducted": a record lost with Redis leaves its items deducted, and the caller
  // must hear that a retry of the DeductOrder restores it.
  if (!r) return create(CompensateResponseSchema, { outcome: CompensateOutcome.NOT_FOUND });
  if (r.outcome !== 'compensated') return create(CompensateResponseSchema, { outcome: CompensateOutcome.NOT_DEDUCTED, items: items(r) });
  return create(CompensateResponseSchema, {
    outcome: r.already ? CompensateOutcome.ALREADY_COMPENSATED : CompensateOutcome.COMPENSATED,
    items: items(r),
  });
}
