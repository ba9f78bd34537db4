// Wraps the transport-free handlers for one transport: counts every call by method and outcome, times unary
// calls, tracks open WatchStock streams, and logs lines about a call with its ids (x-request-id when the
// client sent one, the message's request_id and coupon_id) — never the user id or anything secret.
// Both transports get their own wrapper over the same handlers, so instrumentation lives in one place.
import { randomBytes } from 'node:crypto';
import {
  CompensateOutcomeSchema,
  ConfirmOutcomeSchema,
  DeductOutcomeSchema,
  ExtendOutcomeSchema,
  InventoryService,
  OrderOutcomeSchema,
  ReleaseOutcomeSchema,
  ReserveOutcomeSchema,
  type ConfirmRequest,
  type ExtendHoldRequest,
  type ReleaseRequest,
} from '../gen/inventory/v1/inventory_pb.js';
import { enumValueName } from '../protocol/enum-names.js';
import type { CallContext, InventoryHandlers } from '../transport/handlers.js';
import { GrpcCode, toStatus } from '../transport/status.js';
import { LogThrottle } from '../util/log-throttle.js';
import type { Logger } from '../util/logger.js';
import type { CounterChild } from './fast-metrics.js';
import type { Metrics, Transport } from './metrics.js';

const CODE_NAMES: Record<number, string> = Object.fromEntries(Object.entries(GrpcCode).map(([name, code]) => [code, name.toLowerCase()]));

/** Method names and outcome labels come from the descriptors (protocol/enum-names.ts). */
const M = InventoryService.method;

export interface InstrumentOptions {
  metrics: Metrics;
  transport: Transport;
  log: Logger;
  /** UNAVAILABLE failures are logged at most once per method and cause per this interval. Default 5000. */
  unavailableLogIntervalMs?: number;
}

interface Ids {
  couponId?: string;
  requestId?: string;
}

/** The fields every log line about one call carries. A call without x-request-id gets a random one. */
function callFields(transport: Transport, method: string, req: Ids, ctx: CallContext): Record<string, unknown> {
  const fields: Record<string, unknown> = { rid: ctx.requestId || randomBytes(6).toString('hex'), transport, method };
  if (req.couponId) fields.couponId = req.couponId;
  if (req.requestId) fields.requestId = req.requestId;
  return fields;
}

export function instrumentHandlers(h: InventoryHandlers, o: InstrumentOptions): InventoryHandlers {
  const { metrics, transport, log } = o;
  const unavailableLog = new LogThrottle(o.unavailableLogIntervalMs ?? 5000);
  /** Counter children per method, resolved once per outcome seen. */
  const counterFor = (method: string) => {
    const byOutcome = new Map<string, CounterChild>();
    return (outcome: string) => {
      let c = byOutcome.get(outcome);
      if (!c) {
        c = metrics.rpcCalls.child(transport, method, outcome);
        byOutcome.set(outcome, c);
      }
      return c;
    };
  };

  const failed = (fields: () => Record<string, unknown>, err: unknown): string => {
    const s = toStatus(err);
    // Domain refusals are answers, not faults; bugs (INTERNAL) are logged with the call's ids and stack.
    // A dependency that is away (UNAVAILABLE: Redis failover, MySQL down) fails every call alike: a warning
    // without stack, at most one per method and cause every few seconds.
    if (s.unexpected && s.code === GrpcCode.UNAVAILABLE) {
      const cause = s.unexpected as { name?: string; message?: string };
      const suppressed = unavailableLog.take(`${fields().method}|${cause?.name}`);
      if (suppressed !== undefined) {
        log.warn(
          { ...fields(), code: 'unavailable', cause: `${cause?.name ?? 'Error'}: ${cause?.message ?? String(cause)}`, suppressed },
          'call failed: dependency unavailable',
        );
      }
    } else if (s.unexpected) log.error({ ...fields(), code: CODE_NAMES[s.code], err: s.unexpected }, 'call failed');
    return CODE_NAMES[s.code] ?? 'unknown';
  };
  /** Built once per call, and only when a line is logged. */
  const lazyFields = (method: string, req: Ids, ctx: CallContext) => {
    let fields: Record<string, unknown> | undefined;
    return () => (fields ??= callFields(transport, method, req, ctx));
  };

  const unary = <Req extends Ids, Res>(
    method: string,
    fn: (req: Req, ctx: CallContext) => Promise<Res>,
    outcomeOf: (res: Res) => string = () => 'ok',
  ) => {
    const calls = counterFor(method);
    const duration = metrics.rpcDuration.child(transport, method);
    return async (req: Req, ctx: CallContext): Promise<Res> => {
      const start = performance.now();
      const fields = lazyFields(method, req, ctx);
      let outcome = 'ok';
      try {
        const res = await fn(req, ctx);
        outcome = outcomeOf(res);
        return res;
      } catch (err) {
        outcome = failed(fields, err);
        throw err;
      } finally {
        const seconds = (performance.now() - start) / 1000;
        calls(outcome).inc();
        duration.observe(seconds);
        if (log.isLevelEnabled('debug')) log.debug({ ...fields(), outcome, ms: Math.round(seconds * 1e4) / 10 }, 'call');
      }
    };
  };
  /** PauseSale / ResumeSale: a call that found the sale already in that state is counted apart. */
  const changedOrNot = (r: { changed: boolean }) => (r.changed ? 'ok' : 'unchanged');
  const watchCalls = counterFor(M.watchStock.name);
  const watchMessages = metrics.watchMessages.child(transport);

  return {
    createCoupon: unary(M.createCoupon.name, (req, ctx) => h.createCoupon(req, ctx)),
    getStock: unary(M.getStock.name, (req, ctx) => h.getStock(req, ctx)),
    restock: unary(
      M.restock.name,
      (req, ctx) => h.restock(req, ctx),
      (r) => (r.replayed ? 'replayed' : 'ok'),
    ),
    deduct: unary(
      M.deduct.name,
      (req, ctx) => h.deduct(req, ctx),
      (r) => (r.replayed ? 'replayed' : (enumValueName(DeductOutcomeSchema, r.outcome) ?? 'unknown')),
    ),
    compensate: unary(
      M.compensate.name,
      (req, ctx) => h.compensate(req, ctx),
      (r) => enumValueName(CompensateOutcomeSchema, r.outcome) ?? 'unknown',
    ),
    reconcile: unary(M.reconcile.name, (req, ctx) => h.reconcile(req, ctx)),
    setSaleWindow: unary(M.setSaleWindow.name, (req, ctx) => h.setSaleWindow(req, ctx)),
    getDeduction: unary(M.getDeduction.name, (req, ctx) => h.getDeduction(req, ctx)),
    listLedger: unary(M.listLedger.name, (req, ctx) => h.listLedger(req, ctx)),
    listAnomalies: unary(M.listAnomalies.name, (req, ctx) => h.listAnomalies(req, ctx)),
    pauseSale: unary(M.pauseSale.name, (req, ctx) => h.pauseSale(req, ctx), changedOrNot),
    resumeSale: unary(M.resumeSale.name, (req, ctx) => h.resumeSale(req, ctx), changedOrNot),
    reserve: unary(
      M.reserve.name,
      (req, ctx) => h.reserve(req, ctx),
      (r) => (r.replayed ? 'replayed' : (enumValueName(ReserveOutcomeSchema, r.outcome) ?? 'unknown')),
    ),
    // The hold id carries the coupon and request ids; logged as sent.
    confirm: unary(
      M.confirm.name,
      (req: ConfirmRequest & Ids, ctx) => h.confirm(req, ctx),
      (r) => (r.replayed ? 'replayed' : (enumValueName(ConfirmOutcomeSchema, r.outcome) ?? 'unknown')),
    ),
    // The hold id carries the coupon and request ids; logged as sent.
    release: unary(
      M.release.name,
      (req: ReleaseRequest & Ids, ctx) => h.release(req, ctx),
      (r) => enumValueName(ReleaseOutcomeSchema, r.outcome) ?? 'unknown',
    ),
    // The hold id carries the coupon and request ids; logged as sent.
    extendHold: unary(
      M.extendHold.name,
      (req: ExtendHoldRequest & Ids, ctx) => h.extendHold(req, ctx),
      (r) => enumValueName(ExtendOutcomeSchema, r.outcome) ?? 'unknown',
    ),
    reserveOrder: unary(
      M.reserveOrder.name,
      (req, ctx) => h.reserveOrder(req, ctx),
      (r) => (r.replayed ? 'replayed' : (enumValueName(OrderOutcomeSchema, r.outcome) ?? 'unknown')),
    ),
    deductOrder: unary(
      M.deductOrder.name,
      (req, ctx) => h.deductOrder(req, ctx),
      (r) => (r.replayed ? 'replayed' : (enumValueName(OrderOutcomeSchema, r.outcome) ?? 'unknown')),
    ),

    async *watchStock(req, ctx) {
      const method = M.watchStock.name;
      const start = performance.now();
      const fields = lazyFields(method, req, ctx);
      let outcome = 'ok';
      let sent = 0;
      metrics.watchStreams.inc({ transport });
      try {
        for await (const msg of h.watchStock(req, ctx)) {
          watchMessages.inc();
          sent++;
          yield msg;
        }
      } catch (err) {
        outcome = failed(fields, err);
        throw err;
      } finally {
        if (outcome === 'ok' && ctx.signal.aborted) outcome = 'cancelled';
        metrics.watchStreams.dec({ transport });
        watchCalls(outcome).inc();
        if (log.isLevelEnabled('debug'))
          log.debug({ ...fields(), outcome, sent, ms: Math.round(performance.now() - start) }, 'stream ended');
      }
    },
  };
}
