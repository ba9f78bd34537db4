// The gRPC port: @grpc/grpc-js (measured 5-7x the no-op throughput of connect-node here), with messages
// encoded by protobuf-es, server reflection and grpc.health.v1 on the same port.
import type { Http2SecureServer, Http2Server } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { fromBinary, type DescMethod, type DescService } from '@bufbuild/protobuf';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import { serviceDefinition } from '../protocol/grpc-service-definition.js';
import { type Admission, asCallChain, type Call, type CallChain } from './call-chain.js';
import type { InventoryHandlers } from './handlers.js';
import { reflectionRoot } from './reflection.js';
import { GrpcCode, type RpcStatus, toStatus } from './status.js';
import { DomainError } from '../domain/errors.js';
import { type Config, loadConfig, networkLimits } from '../config.js';
import type { NetworkLimits } from './connection-timers.js';
import { clampDeadlineHeaders } from './deadline-header.js';
import { framingStatus, markUnservedCodec, UNSERVED_CODEC, unservedCodecStatus } from './grpc-framing.js';
import { GrpcConnectionWatch } from './grpc-connection-watch.js';
import { listen, type ListenerStats } from './listener.js';
import { preEncoded } from './sold-out-replies.js';

export interface GrpcServerOptions {
  maxMessageBytes: number;
  onUnexpected: (method: string, err: unknown) => void;
  /** TLS / mTLS; default plaintext. */
  credentials?: grpc.ServerCredentials | undefined;
  /** Connection limits and grpc-js keepalive / age; default loadConfig's defaults. */
  network?: GrpcNetwork | undefined;
  /** Serve server reflection. Default true. */
  reflection?: boolean | undefined;
  /** A refusal at the connection or request level (cap, timeout), by reason. */
  onRefused?: ((reason: string) => void) | undefined;
  onServerError?: ((err: Error) => void) | undefined;
}

export interface GrpcNetwork extends NetworkLimits {
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
}

export function grpcNetwork(c: Readonly<Config>): GrpcNetwork {
  return {
    ...networkLimits(c),
    maxConnectionAgeMs: c.maxConnectionAgeMs,
    maxConnectionAgeGraceMs: c.maxConnectionAgeGraceMs,
  };
}

/** The chain's Call for a grpc-js call: aborts when the call is cancelled or its deadline passes. The caller
 * (authorization, peer) is read only if the gate asks. */
function grpcCall(call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>): Call & { done(): void } {
  const ac = new AbortController();
  const onCancel = () => ac.abort();
  call.once('cancelled', onCancel);
  let timer: NodeJS.Timeout | undefined;
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  if (Number.isFinite(at) && at > 0) {
    const ms = at - Date.now();
    if (ms <= 0) ac.abort();
    else timer = setTimeout(onCancel, ms);
  }
  const rid = call.metadata.get('x-request-id')[0];
  return {
    transport: 'grpc',
    signal: ac.signal,
    requestId: rid === undefined ? undefined : String(rid),
    get authorization() {
      return metadataString(call.metadata, 'authorization');
    },
    get peer() {
      return call.getPeer();
    },
    done() {
      if (timer) clearTimeout(timer);
      call.removeListener('cancelled', onCancel);
    },
  };
}

function metadataString(metadata: grpc.Metadata, key: string): string | undefined {
  const v = metadata.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}

/** The shared status (status.ts) as grpc-js sends it: code, details and trailers (retry-after-ms). */
function grpcError(s: RpcStatus): grpc.ServerErrorResponse {
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(s.metadata ?? {})) metadata.set(k, v);
  return Object.assign(new Error(s.message), { code: s.code, details: s.message, metadata });
}

/** The port is decode → chain → encode: the request arrives as bytes (serverDefinition), is decoded here, and
 * everything between (gate, instrumentation, handler) is the chain's. */
function methodHandler(method: DescMethod, chain: CallChain, options: GrpcServerOptions): grpc.UntypedHandleCall {
  const fail = (err: unknown): grpc.ServerErrorResponse => {
    const s = toStatus(err);
    if (s.unexpected) options.onUnexpected(method.name, s.unexpected);
    return grpcError(s);
  };
  // grpc-js answers a request its deserializer throws on with INTERNAL; the bytes arrive undecoded instead
  // (serverDefinition) and a malformed message is the caller's fault: INVALID_ARGUMENT.
  const decode = (bytes: unknown) => {
    try {
      return fromBinary(method.input, bytes as Uint8Array);
    } catch (err) {
      throw new DomainError('invalid_argument', `request: not a valid ${method.input.typeName} message (${(err as Error).message})`);
    }
  };
  if (method.methodKind === 'unary') {
    const step = chain.unary(method);
    const run = async (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const c = grpcCall(call);
      let res: unknown;
      try {
        res = await step(decode(call.request), c);
      } catch (err) {
        c.done();
        callback(fail(err));
        return;
      }
      c.done();
      callback(null, res);
    };
    return (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => void run(call, callback);
  }
  const step = chain.stream(method);
  return async (call: grpc.ServerWritableStream<unknown, unknown>) => {
    const c = grpcCall(call);
    try {
      for await (const msg of step(decode(call.request), c)) {
        if (c.signal.aborted) break;
        // Slow readers: wait for the socket to drain instead of queueing without bound.
        if (!call.write(msg)) await drained(call, c.signal);
      }
      if (!c.signal.aborted) call.end();
    } catch (err) {
      // emit('error') is how grpc-js ends a server stream with a status; destroy() never sends one (the client hangs).
      if (!c.signal.aborted) call.emit('error', fail(err));
    } finally {
      c.done();
    }
  };
}

/** Resolves when the stream can take more, or when the call ends (a cancelled call never drains). */
function drained(call: grpc.ServerWritableStream<unknown, unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      call.removeListener('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    call.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The server side of serviceDefinition: requests stay bytes until the handler decodes them (see decode), and
 * a reply frozen with its bytes (sold-out-replies.ts) is sent as those bytes (grpc-js copies them into its frame). */
function serverDefinition(service: DescService): grpc.ServiceDefinition {
  const def = serviceDefinition(service);
  for (const m of Object.values(def)) {
    m.requestDeserialize = (buf: Buffer) => buf;
    const encode = m.responseSerialize;
    m.responseSerialize = (msg: unknown) => preEncoded(msg) ?? encode(msg);
  }
  return def;
}

/** Every stream's headers, before grpc-js's own stream handler reads them: grpc-js reads `grpc-timeout` as a
 * 32-bit integer (deadline-header.ts), so a long one is clamped; and a content subtype other than protobuf is
 * marked for the front interceptor to refuse (grpc-framing.ts). grpc-js gives no hook in front of that handler,
 * so this reaches its HTTP/2 servers (one per connection injector) through a private field;
 * test/long-deadlines.test.ts and test/grpc-framing.test.ts fail if that field goes away in a grpc-js upgrade. */
function screenHeaders(server: grpc.Server): void {
  const servers = (server as unknown as { http2Servers?: Map<Http2Server | Http2SecureServer, unknown> }).http2Servers;
  for (const h2 of servers?.keys() ?? []) {
    // The session's own 'stream' listener passes the stream to the server's (grpc-js); ours goes first.
    h2.on('session', (session) =>
      session.prependListener('stream', (_stream, headers) => {
        clampDeadlineHeaders(headers);
        markUnservedCodec(headers);
      }),
    );
  }
}

/** grpc.health.v1 service name for liveness probes (Kubernetes `grpc.service: liveness`). */
export const LIVENESS_SERVICE = 'liveness';

export interface GrpcServer {
  server: grpc.Server;
  health: HealthImplementation;
  port: number;
  connections: ListenerStats;
  /** The chain every InventoryService call goes through (the same object the HTTP port serves). */
  chain: CallChain;
  /** Stops accepting connections (the server's own shutdown then ends the sessions). */
  stopListening(): Promise<void>;
}

const HEALTH_CHECK = '/grpc.health.v1.Health/Check';

/** In front of every call: health Watch and reflection pass the chain's gate (InventoryService calls pass it
 * in the chain), and a call whose request has not arrived in full within the request timeout is cancelled. */
function frontInterceptor(
  gate: Admission | undefined,
  options: GrpcServerOptions,
  requestTimeoutMs: number,
  watch: GrpcConnectionWatch,
): grpc.ServerInterceptor {
  const inventory = `/${InventoryService.typeName}/`;
  return (desc, call) => {
    const method = desc.path.slice(desc.path.lastIndexOf('/') + 1);
    const guarded = gate !== undefined && !desc.path.startsWith(inventory) && desc.path !== HEALTH_CHECK;
    let timer: NodeJS.Timeout | undefined;
    let release: (() => void) | undefined;
    const info = call.getConnectionInfo();
    const ended = watch.callStarted(info.remoteAddress, info.remotePort);
    const finish = () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      release?.();
      release = undefined;
      ended();
    };
    const refuse = (code: number, details: string, metadata = new grpc.Metadata()) => {
      finish();
      call.sendStatus({ code, details, metadata });
    };
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        // A client-streaming call (reflection) has no end of request to wait for.
        if (!desc.requestStream) {
          timer = setTimeout(() => {
            options.onRefused?.('request_timeout');
            refuse(GrpcCode.CANCELLED, `request not received in full within ${requestTimeoutMs} ms`);
          }, requestTimeoutMs).unref();
        }
        next({
          onReceiveMetadata(metadata, nextMetadata) {
            const codec = metadata.get(UNSERVED_CODEC)[0];
            if (codec !== undefined) {
              options.onRefused?.('bad_request');
              const s = unservedCodecStatus(String(codec));
              refuse(s.code, s.details);
              return;
            }
            if (guarded) {
              try {
                release = gate!.admit(method, {
                  authorization: metadataString(metadata, 'authorization'),
                  peer: call.getPeer(),
                  transport: 'grpc',
                });
              } catch (err) {
                const s = toStatus(err);
                refuse(s.code, s.message, grpcError(s).metadata);
                return;
              }
            }
            nextMetadata(metadata);
          },
          onReceiveHalfClose(nextHalfClose) {
            if (timer) clearTimeout(timer);
            timer = undefined;
            nextHalfClose();
          },
          onCancel: finish,
        });
      },
      sendStatus(status, nextStatus) {
        finish();
        nextStatus(framingStatus(status, desc.responseStream ? 'server-streaming' : 'unary'));
      },
    });
  };
}

/** Credentials that re-read their files (SHARDSTOCK_GRPC_TLS_RELOAD_MS) load them asynchronously, and grpc-js
 * drops connections until they are there: the port opens only once the first certificate is loaded. */
async function certificateLoaded(credentials: grpc.ServerCredentials, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (credentials._isSecure() && credentials._getSecureContextOptions() === null) {
    if (Date.now() > until) throw new Error(`gRPC TLS: the certificate files were not loaded within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Serves the call chain (or a bare handler set, which gets a chain without gate) on `addr`. */
export async function startGrpcServer(
  addr: string,
  handlers: CallChain | Partial<InventoryHandlers>,
  options: GrpcServerOptions,
): Promise<GrpcServer> {
  const chain = asCallChain(handlers);
  const net = options.network ?? grpcNetwork(loadConfig({}));
  const watch = new GrpcConnectionWatch(net.headersTimeoutMs, net.idleTimeoutMs, options.onRefused ?? (() => {}));
  const server = new grpc.Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_concurrent_streams': net.maxStreamsPerConnection,
    'grpc.keepalive_time_ms': net.keepaliveMs,
    'grpc.keepalive_timeout_ms': net.keepaliveTimeoutMs,
    'grpc.max_connection_idle_ms': net.idleTimeoutMs,
    'grpc.max_connection_age_ms': net.maxConnectionAgeMs,
    'grpc.max_connection_age_grace_ms': net.maxConnectionAgeGraceMs,
    interceptors: [frontInterceptor(chain.gate, options, net.requestTimeoutMs, watch)],
  });
  const impl: grpc.UntypedServiceImplementation = {};
  for (const m of chain.methods) impl[m.localName] = methodHandler(m, chain, options);
  server.addService(serverDefinition(InventoryService), impl);

  // '' and the service name follow readiness (app.ts); LIVENESS_SERVICE is SERVING for as long as the process
  // answers, so a liveness probe never restarts a pod only because Redis, NATS or MySQL is away.
  const health = new HealthImplementation({ '': 'NOT_SERVING', [InventoryService.typeName]: 'NOT_SERVING', [LIVENESS_SERVICE]: 'SERVING' });
  health.addToServer(server);
  if (options.reflection ?? true) new ReflectionService(reflectionRoot() as never).addToServer(server);

  // We accept the connections ourselves (listener.ts: error handler first, connection cap, first-byte timeout)
  // and hand them to grpc-js, which serves them like those of a port it bound.
  const credentials = options.credentials ?? grpc.ServerCredentials.createInsecure();
  const injector = server.createConnectionInjector(credentials);
  screenHeaders(server);
  await certificateLoaded(credentials);
  const listener = await listen(
    addr,
    { maxConnections: net.maxConnections, firstByteTimeoutMs: net.firstByteTimeoutMs },
    (socket) => {
      watch.add(socket);
      injector.injectConnection(socket);
    },
    options.onServerError ?? (() => {}),
    options.onRefused,
  );
  // Shutting the grpc-js server down also closes the port we listen on for it. grpc-js's own tryShutdown
  // waits for a bound port's connections through its server's close(); injected connections are not counted
  // there, so the graceful shutdown also waits for our listener, whose close() ends with the last connection.
  const tryShutdown = server.tryShutdown.bind(server);
  const forceShutdown = server.forceShutdown.bind(server);
  server.tryShutdown = (callback) => {
    watch.stop();
    let pending = 2;
    let failure: Error | undefined;
    const done = (err?: Error) => {
      failure ??= err;
      if (--pending === 0) callback(failure);
    };
    listener.close().then(() => done());
    listener.destroySilent();
    tryShutdown(done);
  };
  server.forceShutdown = () => {
    watch.stop();
    void listener.close();
    forceShutdown();
    listener.destroyAll();
  };
  return { server, health, port: listener.port, connections: listener.stats, chain, stopListening: () => listener.close() };
}
