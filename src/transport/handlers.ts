// The one set of RPC handlers behind both ports: proto message in, converted to the domain's input (model.ts),
// domain call, proto message out. No transport types here: call-chain.ts puts the gate and the instrumentation
// in front of them, and grpc-server.ts and connect-routes.ts serve that chain over grpc-js and Connect.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  CompensateOutcome,
  CompensateOutcomeSchema,
  CompensateResponseSchema,
  CouponSchema,
  CreateCouponResponseSchema,
  DeductOutcome,
  DeductOutcomeSchema,
  DeductResponseSchema,
  GetStockResponseSchema,
  ReconcileResponseSchema,
  RestockResponseSchema,
  StockLevelSchema,
  WatchStockResponseSchema,
  type CompensateRequest,
  type CompensateResponse,
  type CreateCouponRequest,
  type CreateCouponResponse,
  type DeductRequest,
  type DeductResponse,
  type GetStockRequest,
  type GetStockResponse,
  type ReconcileRequest,
  type ReconcileResponse,
  type RestockRequest,
  type RestockResponse,
  type StockLevel as StockLevelMsg,
  type WatchStockRequest,
  type WatchStockResponse,
  PauseSaleResponseSchema,
  ResumeSaleResponseSchema,
  SetSaleWindowResponseSchema,
  type PauseSaleRequest,
  type PauseSaleResponse,
  type ResumeSaleRequest,
  type ResumeSaleResponse,
  type SetSaleWindowRequest,
  type SetSaleWindowResponse,
  ListAnomaliesResponseSchema,
  ListLedgerResponseSchema,
  type GetDeductionRequest,
  type GetDeductionResponse,
  type ListAnomaliesRequest,
  type ListAnomaliesResponse,
  type ListLedgerRequest,
  type ListLedgerResponse,
  ConfirmOutcome,
  ConfirmResponseSchema,
  ExtendHoldResponseSchema,
  ExtendOutcome,
  HoldSchema,
  HoldState,
  ReleaseOutcome,
  ReleaseResponseSchema,
  ReserveOutcome,
  ReserveResponseSchema,
  type ConfirmRequest,
  type ConfirmResponse,
  type DeductOrderRequest,
  type DeductOrderResponse,
  type ExtendHoldRequest,
  type ExtendHoldResponse,
  type Hold as HoldMsg,
  type ReleaseRequest,
  type ReleaseResponse,
  type ReserveOrderRequest,
  type ReserveOrderResponse,
  type ReserveRequest,
  type ReserveResponse,
} from '../gen/inventory/v1/inventory_pb.js';
import type * as H from '../domain/holds.js';
import type { AuditService } from '../audit/audit-service.js';
import { enumValuesByName } from '../protocol/enum-names.js';
import { anomalyMessage, deductionMessage, ledgerEntryMessage, ledgerKinds } from './audit-messages.js';
import { saleView, type CouponAdmin } from '../domain/admin.js';
import type { SaleSettings, StockLevel } from '../domain/model.js';
import type { SaleControl } from '../domain/sale.js';
import { instantOf, saleMessage } from './sale-messages.js';
import type { CompensateOutcome as DomainCompensateOutcome, CompensateService } from '../domain/compensate.js';
import type { DeductOutcome as DomainDeductOutcome, DeductService } from '../domain/deduct.js';
import { DomainError, invalid } from '../domain/errors.js';
import type { Reconciliation } from '../domain/reconcile-types.js';
import type { OrderService } from '../domain/orders.js';
import {
  compensateOrderMessage,
  confirmOrderMessage,
  deductOrderMessage,
  extendOrderMessage,
  orderInput,
  releaseOrderMessage,
  reserveOrderMessage,
} from './order-messages.js';
import { SoldOutReplies } from './sold-out-replies.js';

export interface CallContext {
  /** Aborted when the client cancels, disconnects or its deadline passes. */
  signal: AbortSignal;
  /** The client's x-request-id header, if it sent one: carried on every log line about the call. */
  requestId?: string | undefined;
}

/** One method per RPC, named as the descriptor's localName. A new RPC needs only its method here (and in
 *  createHandlers): the call chain gates and instruments every RPC of the proto that has a handler. */
export interface InventoryHandlers {
  createCoupon(req: CreateCouponRequest, ctx: CallContext): Promise<CreateCouponResponse>;
  getStock(req: GetStockRequest, ctx: CallContext): Promise<GetStockResponse>;
  restock(req: RestockRequest, ctx: CallContext): Promise<RestockResponse>;
  deduct(req: DeductRequest, ctx: CallContext): Promise<DeductResponse>;
  compensate(req: CompensateRequest, ctx: CallContext): Promise<CompensateResponse>;
  watchStock(req: WatchStockRequest, ctx: CallContext): AsyncIterable<WatchStockResponse>;
  reconcile(req: ReconcileRequest, ctx: CallContext): Promise<ReconcileResponse>;
  setSaleWindow(req: SetSaleWindowRequest, ctx: CallContext): Promise<SetSaleWindowResponse>;
  pauseSale(req: PauseSaleRequest, ctx: CallContext): Promise<PauseSaleResponse>;
  resumeSale(req: ResumeSaleRequest, ctx: CallContext): Promise<ResumeSaleResponse>;
  getDeduction(req: GetDeductionRequest, ctx: CallContext): Promise<GetDeductionResponse>;
  listLedger(req: ListLedgerRequest, ctx: CallContext): Promise<ListLedgerResponse>;
  listAnomalies(req: ListAnomaliesRequest, ctx: CallContext): Promise<ListAnomaliesResponse>;
  reserve(req: ReserveRequest, ctx: CallContext): Promise<ReserveResponse>;
  confirm(req: ConfirmRequest, ctx: CallContext): Promise<ConfirmResponse>;
  release(req: ReleaseRequest, ctx: CallContext): Promise<ReleaseResponse>;
  extendHold(req: ExtendHoldRequest, ctx: CallContext): Promise<ExtendHoldResponse>;
  reserveOrder(req: ReserveOrderRequest, ctx: CallContext): Promise<ReserveOrderResponse>;
  deductOrder(req: DeductOrderRequest, ctx: CallContext): Promise<DeductOrderResponse>;
}

export interface HandlerDeps {
  admin: CouponAdmin;
  deduct: DeductService;
  compensate: CompensateService;
  reconcile?: { reconcile(couponId: string, options?: { repair?: boolean }): Promise<Reconciliation> } | undefined;
  watch?: { watch(couponId: string, minIntervalMs: number, signal: AbortSignal): AsyncIterable<StockLevel> } | undefined;
  sale?: SaleControl | undefined;
  audit?: AuditService | undefined;
  holds?: H.Holds | undefined;
  orders?: OrderService | undefined;
}

// Domain outcomes are named as the proto's enum values (protocol/enum-names.ts); the typing makes a domain
// outcome the proto lacks a compile error.
const DEDUCT_OUTCOMES = enumValuesByName(DeductOutcomeSchema, DeductOutcome) satisfies Record<DomainDeductOutcome, DeductOutcome>;
const COMPENSATE_OUTCOMES = enumValuesByName(CompensateOutcomeSchema, CompensateOutcome) satisfies Record<
  DomainCompensateOutcome,
  CompensateOutcome
>;

const RESERVE_OUTCOMES: Record<H.ReserveOutcome, ReserveOutcome> = {
  held: ReserveOutcome.HELD,
  sold_out: ReserveOutcome.SOLD_OUT,
  insufficient: ReserveOutcome.INSUFFICIENT,
  user_limit_exceeded: ReserveOutcome.USER_LIMIT_EXCEEDED,
  not_started: ReserveOutcome.NOT_STARTED,
  ended: ReserveOutcome.ENDED,
  sale_paused: ReserveOutcome.SALE_PAUSED,
};

const HOLD_STATES: Record<H.HoldState, HoldState> = {
  held: HoldState.HELD,
  confirmed: HoldState.CONFIRMED,
  released: HoldState.RELEASED,
  expired: HoldState.EXPIRED,
};

const CONFIRM_OUTCOMES: Record<H.ConfirmOutcome, ConfirmOutcome> = {
  confirmed: ConfirmOutcome.CONFIRMED,
  expired: ConfirmOutcome.EXPIRED,
  released: ConfirmOutcome.RELEASED,
  not_found: ConfirmOutcome.NOT_FOUND,
};

const RELEASE_OUTCOMES: Record<H.ReleaseOutcome, ReleaseOutcome> = {
  released: ReleaseOutcome.RELEASED,
  already_released: ReleaseOutcome.ALREADY_RELEASED,
  expired: ReleaseOutcome.EXPIRED,
  confirmed: ReleaseOutcome.CONFIRMED,
  not_found: ReleaseOutcome.NOT_FOUND,
};

const EXTEND_OUTCOMES: Record<H.ExtendOutcome, ExtendOutcome> = {
  extended: ExtendOutcome.EXTENDED,
  expired: ExtendOutcome.EXPIRED,
  released: ExtendOutcome.RELEASED,
  confirmed: ExtendOutcome.CONFIRMED,
  not_found: ExtendOutcome.NOT_FOUND,
};

export function holdMessage(h: H.Hold | undefined): HoldMsg | undefined {
  if (!h) return undefined;
  return create(HoldSchema, {
    holdId: h.holdId,
    couponId: h.couponId,
    requestId: h.requestId,
    userId: h.userId,
    quantity: BigInt(h.quantity),
    confirmed: BigInt(h.confirmed),
    shard: h.shard,
    expiresAt: timestampFromDate(new Date(h.expiresAtMs)),
    state: HOLD_STATES[h.state],
  });
}

/** An order's answer, or null when there is no such order (answered NOT_FOUND in the RPC's own outcome). */
async function orNotFound<T>(call: Promise<T>): Promise<T | null> {
  try {
    return await call;
  } catch (err) {
    if (err instanceof DomainError && err.kind === 'not_found') return null;
    throw err;
  }
}

/** The hold a Confirm / Release / ExtendHold names (order targets are served before, by the orders use case). */
function holdTarget(t: { case: 'holdId' | 'orderId'; value: string } | { case: undefined; value?: undefined }): string {
  if (t.case === 'holdId') return t.value;
  throw invalid('hold_id', 'is required (or order_id)');
}

export function levelMessage(l: StockLevel): StockLevelMsg {
  return create(StockLevelSchema, {
    couponId: l.couponId,
    totalStock: BigInt(l.totalStock),
    available: BigInt(l.available),
    deducted: BigInt(l.deducted),
    settledRemaining: BigInt(l.settledRemaining),
    pendingSettlement: BigInt(l.pendingSettlement),
    soldOut: l.soldOut,
    held: BigInt(l.held ?? 0),
    shards: l.shards.map((s) => ({
      index: s.index,
      available: BigInt(s.available),
      inTransit: BigInt(s.inTransit),
      held: BigInt(s.held ?? 0),
    })),
    observedAt: timestampFromDate(l.observedAt),
    sale: saleMessage(l.sale),
  });
}

export function createHandlers(d: HandlerDeps): InventoryHandlers {
  const watchMessages = new WeakMap<StockLevel, WatchStockResponse>();
  const soldOutReplies = new SoldOutReplies();
  const sale = () => {
    if (!d.sale) throw new DomainError('unimplemented', 'sale control is not served by this instance');
    return d.sale;
  };
  const audit = () => {
    if (!d.audit) throw new DomainError('unimplemented', 'the audit API is not served by this instance');
    return d.audit;
  };
  const holds = () => {
    if (!d.holds) throw new DomainError('unimplemented', 'holds are not served by this instance');
    return d.holds;
  };
  const orders = () => {
    if (!d.orders) throw new DomainError('unimplemented', 'orders are not served by this instance');
    return d.orders;
  };
  const saleNow = (s: SaleSettings) => saleMessage(saleView(s, d.admin.now()));
  return {
    async createCoupon(req) {
      const { coupon, created } = await d.admin.create({
        couponId: req.couponId,
        totalStock: req.totalStock,
        shardCount: req.shardCount,
        perUserLimit: req.perUserLimit,
        startsAt: instantOf(req.startsAt),
        endsAt: instantOf(req.endsAt),
      });
      return create(CreateCouponResponseSchema, {
        created,
        coupon: create(CouponSchema, {
          couponId: coupon.id,
          totalStock: BigInt(coupon.initialStock),
          shardCount: coupon.shardCount,
          perUserLimit: coupon.perUserLimit,
          createdAt: timestampFromDate(coupon.createdAt),
          sale: saleMessage(saleView(coupon.sale, d.admin.now())),
        }),
      });
    },

    async getStock(req) {
      return create(GetStockResponseSchema, { level: levelMessage(await d.admin.level(req.couponId, req.includeShards)) });
    },

    async restock(req) {
      const r = await d.admin.restock({ couponId: req.couponId, quantity: req.quantity, requestId: req.requestId });
      return create(RestockResponseSchema, { level: levelMessage(r.level), replayed: r.replayed });
    },

    async deduct(req, ctx) {
      const r = await d.deduct.deduct(
        { couponId: req.couponId, requestId: req.requestId, userId: req.userId, quantity: req.quantity, allowPartial: req.allowPartial },
        ctx.signal,
      );
      if (r.outcome === 'sold_out' && !r.replayed && r.remaining === 0 && r.granted === 0) return soldOutReplies.reply(r.shard);
      return create(DeductResponseSchema, {
        outcome: DEDUCT_OUTCOMES[r.outcome],
        replayed: r.replayed,
        compensated: r.compensated ?? false,
        remaining: BigInt(r.remaining),
        shard: r.shard,
        granted: BigInt(r.granted),
      });
    },

    async compensate(req, ctx) {
      if (req.orderId !== '') return compensateOrderMessage(await orNotFound(orders().compensateOrder(req.orderId, req.reason)));
      const r = await d.compensate.compensate({ couponId: req.couponId, requestId: req.requestId, reason: req.reason }, ctx.signal);
      return create(CompensateResponseSchema, { outcome: COMPENSATE_OUTCOMES[r.outcome], remaining: BigInt(r.remaining) });
    },

    async setSaleWindow(req) {
      const r = await sale().setWindow({ ...req, startsAt: instantOf(req.startsAt), endsAt: instantOf(req.endsAt) });
      return create(SetSaleWindowResponseSchema, { sale: saleNow(r.sale) });
    },

    async pauseSale(req) {
      const r = await sale().pause(req);
      return create(PauseSaleResponseSchema, { sale: saleNow(r.sale), changed: r.changed });
    },

    async resumeSale(req) {
      const r = await sale().resume(req);
      return create(ResumeSaleResponseSchema, { sale: saleNow(r.sale), changed: r.changed });
    },

    async getDeduction(req) {
      return deductionMessage(await audit().deduction(req));
    },

    async listLedger(req) {
      const r = await audit().ledger({ ...req, kinds: ledgerKinds(req.kinds), since: instantOf(req.since), until: instantOf(req.until) });
      return create(ListLedgerResponseSchema, { entries: r.entries.map(ledgerEntryMessage), nextPageToken: r.nextPageToken });
    },

    async listAnomalies(req) {
      const r = await audit().anomalies(req);
      return create(ListAnomaliesResponseSchema, { anomalies: r.anomalies.map(anomalyMessage), nextPageToken: r.nextPageToken });
    },

    async reserve(req, ctx) {
      const r = await holds().reserve(
        { couponId: req.couponId, requestId: req.requestId, userId: req.userId, quantity: req.quantity, ttlMs: req.ttlMs },
        ctx.signal,
      );
      return create(ReserveResponseSchema, {
        outcome: RESERVE_OUTCOMES[r.outcome],
        replayed: r.replayed,
        hold: holdMessage(r.hold),
        remaining: BigInt(r.remaining),
        shard: r.shard,
      });
    },

    async confirm(req, ctx) {
      if (req.target.case === 'orderId') return confirmOrderMessage(await orNotFound(orders().confirmOrder(req.target.value)));
      const r = await holds().confirm(holdTarget(req.target), req.quantity, ctx.signal);
      return create(ConfirmResponseSchema, {
        outcome: CONFIRM_OUTCOMES[r.outcome],
        replayed: r.replayed,
        hold: holdMessage(r.hold),
        released: BigInt(r.released),
      });
    },

    async release(req, ctx) {
      if (req.target.case === 'orderId') return releaseOrderMessage(await orNotFound(orders().releaseOrder(req.target.value, req.reason)));
      const r = await holds().release(holdTarget(req.target), req.reason, ctx.signal);
      return create(ReleaseResponseSchema, {
        outcome: RELEASE_OUTCOMES[r.outcome],
        hold: holdMessage(r.hold),
        released: BigInt(r.released),
      });
    },

    async extendHold(req, ctx) {
      if (req.target.case === 'orderId') return extendOrderMessage(await orNotFound(orders().extendOrder(req.target.value, req.ttlMs)));
      const r = await holds().extend(holdTarget(req.target), req.ttlMs, ctx.signal);
      return create(ExtendHoldResponseSchema, { outcome: EXTEND_OUTCOMES[r.outcome], hold: holdMessage(r.hold) });
    },

    async reserveOrder(req, ctx) {
      return reserveOrderMessage(await orders().reserveOrder(orderInput(req), ctx.signal));
    },

    async deductOrder(req, ctx) {
      return deductOrderMessage(await orders().deductOrder(orderInput(req), ctx.signal));
    },

    async *watchStock(req, ctx) {
      if (!d.watch) throw new DomainError('unimplemented', 'WatchStock is not served by this instance');
      for await (const level of d.watch.watch(req.couponId, req.minIntervalMs, ctx.signal)) {
        // One level is fanned out to every stream of the coupon: build its message once.
        let msg = watchMessages.get(level);
        if (!msg) {
          msg = create(WatchStockResponseSchema, { level: levelMessage(level) });
          watchMessages.set(level, msg);
        }
        yield msg;
      }
    },

    async reconcile(req) {
      if (!d.reconcile) throw new DomainError('unimplemented', 'Reconcile is not served by this instance');
      const r = await d.reconcile.reconcile(req.couponId, { repair: req.repair });
      return create(ReconcileResponseSchema, {
        couponId: r.couponId,
        totalStock: BigInt(r.totalStock),
        ledgerDeducted: BigInt(r.ledgerDeducted),
        ledgerCompensated: BigInt(r.ledgerCompensated),
        ledgerRestocked: BigInt(r.ledgerRestocked),
        settledRemaining: BigInt(r.settledRemaining),
        redisAvailable: BigInt(r.redisAvailable),
        redisHeld: BigInt(r.redisHeld ?? 0),
        redisNetDeducted: BigInt(r.redisNetDeducted),
        inFlightNet: BigInt(r.inFlightNet),
        outboxEvents: BigInt(r.outboxEvents),
        jetstreamPending: BigInt(r.jetstreamPending),
        anomalyUnits: BigInt(r.anomalyUnits),
        anomalies: BigInt(r.anomalies),
        ledgerDrift: BigInt(r.ledgerDrift),
        redisDrift: BigInt(r.redisDrift),
        consistent: r.consistent,
        checkedAt: timestampFromDate(r.checkedAt),
        repair: r.repair && {
          rebuiltShards: r.repair.rebuiltShards,
          loadedUnits: BigInt(r.repair.loadedUnits),
          loweredUnits: BigInt(r.repair.loweredUnits),
          restoredUnits: BigInt(r.repair.restoredUnits),
          restoredRecords: BigInt(r.repair.restoredRecords),
          bound: BigInt(r.repair.bound),
          pausedMs: BigInt(r.repair.pausedMs),
        },
      });
    },
  };
}
