// Connect, gRPC-Web and gRPC-over-HTTP routes for the HTTP port, adapting the same handlers the grpc-js
// port serves. Domain errors become ConnectErrors through the shared status mapping.
import { type Code, ConnectError, type ConnectRouter, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import type { CallContext, InventoryHandlers } from './handlers.js';
import { toStatus } from './status.js';
import { peerKey } from './http-server.js';
import { parseErrorsAreInvalidArgument } from './parse-errors.js';

export interface ConnectRoutesOptions {
  onUnexpected: (method: string, err: unknown) => void;
  /** Same contract as GrpcServerOptions.guard: throw to refuse; a returned function runs when the call ends. */
  guard?: ((method: string, headers: Headers, peer: string) => (() => void) | undefined) | undefined;
}

/** The transport-free call context: the abort signal and the client's x-request-id. */
function callContext(ctx: HandlerContext): CallContext {
  return { signal: ctx.signal, requestId: ctx.requestHeader.get('x-request-id') ?? undefined };
}

/** Method names come from the service descriptor, as grpc-server.ts takes them. */
const M = InventoryService.method;

export function inventoryRoutes(handlers: InventoryHandlers, options: ConnectRoutesOptions) {
  const fail = (method: string, err: unknown): ConnectError => {
    const s = toStatus(err);
    if (s.unexpected) options.onUnexpected(method, s.unexpected);
    return new ConnectError(s.message, s.code as Code, s.metadata ? new Headers(s.metadata) : undefined);
  };
  // Runs one handler call with the guard in front and the shared error mapping behind.
  const call = async <T>(method: string, ctx: HandlerContext, run: () => Promise<T>): Promise<T> => {
    let release: (() => void) | undefined;
    try {
      release = options.guard?.(method, ctx.requestHeader, ctx.values.get(peerKey));
      return await run();
    } catch (err) {
      throw fail(method, err);
    } finally {
      if (release) release();
    }
  };
  const impl: ServiceImpl<typeof InventoryService> = {
    createCoupon: (req, ctx) => call(M.createCoupon.name, ctx, () => handlers.createCoupon(req, callContext(ctx))),
    getStock: (req, ctx) => call(M.getStock.name, ctx, () => handlers.getStock(req, callContext(ctx))),
    restock: (req, ctx) => call(M.restock.name, ctx, () => handlers.restock(req, callContext(ctx))),
    deduct: (req, ctx) => call(M.deduct.name, ctx, () => handlers.deduct(req, callContext(ctx))),
    compensate: (req, ctx) => call(M.compensate.name, ctx, () => handlers.compensate(req, callContext(ctx))),
    reconcile: (req, ctx) => call(M.reconcile.name, ctx, () => handlers.reconcile(req, callContext(ctx))),
    setSaleWindow: (req, ctx) => call(M.setSaleWindow.name, ctx, () => handlers.setSaleWindow(req, callContext(ctx))),
    pauseSale: (req, ctx) => call(M.pauseSale.name, ctx, () => handlers.pauseSale(req, callContext(ctx))),
    resumeSale: (req, ctx) => call(M.resumeSale.name, ctx, () => handlers.resumeSale(req, callContext(ctx))),
    getDeduction: (req, ctx) => call(M.getDeduction.name, ctx, () => handlers.getDeduction(req, callContext(ctx))),
    listLedger: (req, ctx) => call(M.listLedger.name, ctx, () => handlers.listLedger(req, callContext(ctx))),
    listAnomalies: (req, ctx) => call(M.listAnomalies.name, ctx, () => handlers.listAnomalies(req, callContext(ctx))),
    reserve: (req, ctx) => call(M.reserve.name, ctx, () => handlers.reserve(req, callContext(ctx))),
    confirm: (req, ctx) => call(M.confirm.name, ctx, () => handlers.confirm(req, callContext(ctx))),
    release: (req, ctx) => call(M.release.name, ctx, () => handlers.release(req, callContext(ctx))),
    extendHold: (req, ctx) => call(M.extendHold.name, ctx, () => handlers.extendHold(req, callContext(ctx))),
    reserveOrder: (req, ctx) => call(M.reserveOrder.name, ctx, () => handlers.reserveOrder(req, callContext(ctx))),
    deductOrder: (req, ctx) => call(M.deductOrder.name, ctx, () => handlers.deductOrder(req, callContext(ctx))),
    async *watchStock(req, ctx) {
      let release: (() => void) | undefined;
      try {
        release = options.guard?.(M.watchStock.name, ctx.requestHeader, ctx.values.get(peerKey));
        yield* handlers.watchStock(req, callContext(ctx));
      } catch (err) {
        if (!ctx.signal.aborted) throw fail(M.watchStock.name, err);
      } finally {
        if (release) release();
      }
    },
  };
  return (router: ConnectRouter) => {
    router.service(InventoryService, impl);
    parseErrorsAreInvalidArgument(router.handlers);
  };
}
