// Opens both ports over the one call chain: gRPC (grpc-js) and HTTP (Connect, plus the plain routes: metrics,
// the live page, health). The chain (gate → instrument → handler) is built here once and both ports serve
// that same object. If the second port cannot open, the first is closed again.
import { type Config, networkLimits } from '../config.js';
import type { Metrics } from '../observability/metrics.js';
import { instrumentCalls } from '../observability/instrument-link.js';
import { type Admission, CallChain } from '../transport/call-chain.js';
import { inventoryRoutes } from '../transport/connect-routes.js';
import { grpcNetwork, startGrpcServer, type GrpcServer } from '../transport/grpc-server.js';
import type { InventoryHandlers } from '../transport/handlers.js';
import { startHttpServer, type HttpServer, type PlainRoute } from '../transport/http-server.js';
import type { Logger } from '../util/logger.js';
import { grpcServerCredentials } from './security.js';

export interface TransportDeps {
  handlers: InventoryHandlers;
  plain: PlainRoute[];
  /** The call gate (src/access/call-gate.ts), the chain's first link. */
  gate: Admission;
  metrics: Metrics;
  log: Logger;
  /** Counts a call or connection refused before it reached a handler. */
  refused(port: 'grpc' | 'http'): (reason: string) => void;
}

/** The one chain both ports serve: every RPC of the proto with a handler in the set is gated and instrumented. */
export function inventoryChain(d: Pick<TransportDeps, 'handlers' | 'gate' | 'metrics' | 'log'>): CallChain {
  const instrument = instrumentCalls({ metrics: d.metrics, log: d.log });
  return new CallChain(d.handlers, { gate: d.gate, links: [instrument.link], onRefused: instrument.refusedBy });
}

export async function startTransports(
  config: Readonly<Config>,
  d: TransportDeps,
): Promise<{ grpc: GrpcServer; http: HttpServer; chain: CallChain }> {
  const { log, refused } = d;
  const chain = inventoryChain(d);
  // Failures are logged by the chain's instrument link, with the call's request ids; not twice.
  const onUnexpected = () => {};
  const onServerError = (port: string) => (err: Error) => log.warn({ port, err: err.message }, 'listener error');
  let grpc: GrpcServer | undefined;
  let http: HttpServer | undefined;
  try {
    grpc = await startGrpcServer(config.grpcAddr, chain, {
      maxMessageBytes: config.maxMessageBytes,
      onUnexpected,
      credentials: grpcServerCredentials(config),
      network: grpcNetwork(config),
      reflection: config.reflection,
      onRefused: refused('grpc'),
      onServerError: onServerError('grpc'),
    });
    http = await startHttpServer(config.httpAddr, {
      routes: inventoryRoutes(chain, { onUnexpected }),
      plain: d.plain,
      maxMessageBytes: config.maxMessageBytes,
      limits: networkLimits(config),
      onRefused: refused('http'),
      onServerError: onServerError('http'),
    });
  } catch (err) {
    grpc?.server.forceShutdown();
    await http?.close(0);
    throw err;
  }
  return { grpc, http, chain };
}
