// Connect, gRPC-Web and gRPC-over-HTTP routes for the HTTP port: connect-es decodes the request, the call
// chain (call-chain.ts: gate → instrument → handler, the same object the grpc-js port serves) runs it, and a
// failure leaves as a ConnectError built from the shared status mapping (status.ts).
import type { DescMethod } from '@bufbuild/protobuf';
import { type Code, ConnectError, type ConnectRouter, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import { asCallChain, type Call, type CallChain } from './call-chain.js';
import type { InventoryHandlers } from './handlers.js';
import { peerKey } from './http-server.js';
import { parseErrorsAreInvalidArgument } from './parse-errors.js';
import { toStatus } from './status.js';

export interface ConnectRoutesOptions {
  onUnexpected: (method: string, err: unknown) => void;
}

/** The chain's Call for a Connect call: connect-es already aborts ctx.signal on cancel and timeout. */
function connectCall(ctx: HandlerContext): Call {
  const headers = ctx.requestHeader;
  return {
    transport: 'connect',
    signal: ctx.signal,
    requestId: headers.get('x-request-id') ?? undefined,
    authorization: headers.get('authorization') ?? undefined,
    peer: ctx.values.get(peerKey),
  };
}

type AnyImpl = Record<string, (req: unknown, ctx: HandlerContext) => unknown>;

/** Serves the call chain (or a bare handler set, which gets a chain without gate). */
export function inventoryRoutes(handlers: CallChain | Partial<InventoryHandlers>, options: ConnectRoutesOptions) {
  const chain = asCallChain(handlers);
  const fail = (method: DescMethod, err: unknown): ConnectError => {
    const s = toStatus(err);
    if (s.unexpected) options.onUnexpected(method.name, s.unexpected);
    return new ConnectError(s.message, s.code as Code, s.metadata ? new Headers(s.metadata) : undefined);
  };
  const impl: AnyImpl = {};
  for (const method of chain.methods) {
    if (method.methodKind === 'unary') {
      const step = chain.unary(method);
      impl[method.localName] = async (req, ctx) => {
        try {
          return await step(req, connectCall(ctx));
        } catch (err) {
          throw fail(method, err);
        }
      };
    } else if (method.methodKind === 'server_streaming') {
      const step = chain.stream(method);
      impl[method.localName] = async function* (req, ctx) {
        try {
          yield* step(req, connectCall(ctx));
        } catch (err) {
          if (!ctx.signal.aborted) throw fail(method, err);
        }
        // A stream ends quietly when its signal aborts; connect-es would then end it OK, which tells a client
        // whose deadline passed to reconnect at once. The reason is connect-es's own: DEADLINE_EXCEEDED, or
        // CANCELED for a client that left (which nobody reads).
        if (ctx.signal.aborted) throw ConnectError.from(ctx.signal.reason);
      };
    }
  }
  return (router: ConnectRouter) => {
    router.service(InventoryService, impl as unknown as ServiceImpl<typeof InventoryService>);
    parseErrorsAreInvalidArgument(router.handlers);
  };
}
