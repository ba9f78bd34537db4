// Connect, gRPC-Web and gRPC-over-HTTP routes for the HTTP port, adapting the same handlers the grpc-js
// port serves. Domain errors become ConnectErrors through the shared status mapping.
import { Code, ConnectError, type ConnectRouter, type ServiceImpl } from '@connectrpc/connect';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import type { InventoryHandlers } from './handlers.js';
import { toStatus } from './status.js';

export interface ConnectRoutesOptions {
  onUnexpected: (method: string, err: unknown) => void;
  guard?: ((method: string, headers: Headers) => void) | undefined;
}

export function inventoryRoutes(handlers: InventoryHandlers, options: ConnectRoutesOptions) {
  const fail = (method: string, err: unknown): ConnectError => {
    const s = toStatus(err);
    if (s.unexpected) options.onUnexpected(method, s.unexpected);
    return new ConnectError(s.message, s.code as Code);
  };
  // Runs one handler call with the guard in front and the shared error mapping behind.
  const call = async <T>(method: string, headers: Headers, run: () => Promise<T>): Promise<T> => {
    try {
      options.guard?.(method, headers);
      return await run();
    } catch (err) {
      throw fail(method, err);
    }
  };
  const impl: ServiceImpl<typeof InventoryService> = {
    createCoupon: (req, ctx) => call('CreateCoupon', ctx.requestHeader, () => handlers.createCoupon(req, ctx)),
    getStock: (req, ctx) => call('GetStock', ctx.requestHeader, () => handlers.getStock(req, ctx)),
    restock: (req, ctx) => call('Restock', ctx.requestHeader, () => handlers.restock(req, ctx)),
    deduct: (req, ctx) => call('Deduct', ctx.requestHeader, () => handlers.deduct(req, ctx)),
    compensate: (req, ctx) => call('Compensate', ctx.requestHeader, () => handlers.compensate(req, ctx)),
    reconcile: (req, ctx) => call('Reconcile', ctx.requestHeader, () => handlers.reconcile(req, ctx)),
    async *watchStock(req, ctx) {
      try {
        options.guard?.('WatchStock', ctx.requestHeader);
        yield* handlers.watchStock(req, { signal: ctx.signal });
      } catch (err) {
        if (!ctx.signal.aborted) throw fail('WatchStock', err);
      }
    },
  };
  return (router: ConnectRouter) => router.service(InventoryService, impl);
}
