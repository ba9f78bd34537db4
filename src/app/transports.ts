// Opens both ports over the one handler set: gRPC (grpc-js) and HTTP (Connect, plus the plain routes: metrics,
// the live page, health). If the second cannot open, the first is closed again.
import { type Config, networkLimits } from '../config.js';
import type { Metrics } from '../observability/metrics.js';
import { instrumentHandlers } from '../observability/instrument-handlers.js';
import { inventoryRoutes } from '../transport/connect-routes.js';
import { grpcNetwork, startGrpcServer, type GrpcServer } from '../transport/grpc-server.js';
import type { InventoryHandlers } from '../transport/handlers.js';
import { startHttpServer, type HttpServer, type PlainRoute } from '../transport/http-server.js';
import type { Logger } from '../util/logger.js';
import { grpcServerCredentials, type guards } from './security.js';

export interface TransportDeps {
  handlers: InventoryHandlers;
  plain: PlainRoute[];
  guard: ReturnType<typeof guards>;
  metrics: Metrics;
  log: Logger;
  /** Counts a call or connection refused before it reached a handler. */
  refused(port: 'grpc' | 'http'): (reason: string) => void;
}

export async function startTransports(config: Readonly<Config>, d: TransportDeps): Promise<{ grpc: GrpcServer; http: HttpServer }> {
  const { handlers, metrics, log, refused } = d;
  // Failures are logged by the instrumented handlers, with the call's request ids; not twice.
  const onUnexpected = () => {};
  const onServerError = (port: string) => (err: Error) => log.warn({ port, err: err.message }, 'listener error');
  let grpc: GrpcServer | undefined;
  let http: HttpServer | undefined;
  try {
    grpc = await startGrpcServer(config.grpcAddr, instrumentHandlers(handlers, { metrics, transport: 'grpc', log }), {
      maxMessageBytes: config.maxMessageBytes,
      onUnexpected,
      guard: d.guard.grpc,
      credentials: grpcServerCredentials(config),
      network: grpcNetwork(config),
      reflection: config.reflection,
      onRefused: refused('grpc'),
      onServerError: onServerError('grpc'),
    });
    http = await startHttpServer(config.httpAddr, {
      routes: inventoryRoutes(instrumentHandlers(handlers, { metrics, transport: 'connect', log }), {
        onUnexpected,
        guard: d.guard.connect,
      }),
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
  return { grpc, http };
}
