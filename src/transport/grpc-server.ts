// The gRPC port: @grpc/grpc-js (measured 5-7x the no-op throughput of connect-node here), with messages
// encoded by protobuf-es, server reflection and grpc.health.v1 on the same port.
import * as grpc from '@grpc/grpc-js';
import { fromBinary, type DescMethod, type DescService } from '@bufbuild/protobuf';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import { serviceDefinition } from '../protocol/grpc-service-definition.js';
import type { CallContext, InventoryHandlers } from './handlers.js';
import { reflectionRoot } from './reflection.js';
import { GrpcCode, toStatus } from './status.js';
import { DomainError } from '../domain/errors.js';

export interface GrpcServerOptions {
  maxMessageBytes: number;
  onUnexpected: (method: string, err: unknown) => void;
  /** Optional hook in front of every call (auth, rate limits, load shedding); throws a DomainError to refuse.
   * `peer` is the caller's address; a returned function is called once the call is finished. */
  guard?: ((method: string, metadata: grpc.Metadata, peer: string) => (() => void) | undefined) | undefined;
  /** TLS / mTLS; default plaintext. */
  credentials?: grpc.ServerCredentials | undefined;
}

/** Aborts when the call is cancelled or its deadline passes. */
function callContext(
  call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>,
): CallContext & { done(): void } {
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
    signal: ac.signal,
    requestId: rid === undefined ? undefined : String(rid),
    done() {
      if (timer) clearTimeout(timer);
      call.removeListener('cancelled', onCancel);
    },
  };
}

function methodHandler(method: DescMethod, handlers: InventoryHandlers, options: GrpcServerOptions): grpc.UntypedHandleCall {
  const name = method.localName as keyof InventoryHandlers;
  const fail = (err: unknown): grpc.ServerErrorResponse => {
    const s = toStatus(err);
    if (s.unexpected) options.onUnexpected(method.name, s.unexpected);
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(s.metadata ?? {})) metadata.set(k, v);
    return Object.assign(new Error(s.message), { code: s.code, details: s.message, metadata });
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
    const h = handlers[name] as (req: unknown, ctx: CallContext) => Promise<unknown>;
    return (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const ctx = callContext(call);
      if (ctx.signal.aborted) {
        ctx.done();
        callback({ code: GrpcCode.DEADLINE_EXCEEDED, details: 'deadline exceeded before the call started' } as grpc.ServiceError);
        return;
      }
      let release: (() => void) | undefined;
      Promise.resolve()
        .then(() => (release = options.guard?.(method.name, call.metadata, call.getPeer())))
        .then(() => h(decode(call.request), ctx))
        .then(
          (res) => callback(null, res),
          (err) => callback(fail(err)),
        )
        .finally(() => {
          ctx.done();
          if (release) release();
        });
    };
  }
  const h = handlers[name] as (req: unknown, ctx: CallContext) => AsyncIterable<unknown>;
  return async (call: grpc.ServerWritableStream<unknown, unknown>) => {
    const ctx = callContext(call);
    let release: (() => void) | undefined;
    try {
      release = options.guard?.(method.name, call.metadata, call.getPeer());
      for await (const msg of h(decode(call.request), ctx)) {
        if (ctx.signal.aborted) break;
        // Slow readers: wait for the socket to drain instead of queueing without bound.
        if (!call.write(msg)) await drained(call, ctx.signal);
      }
      if (!ctx.signal.aborted) call.end();
    } catch (err) {
      // emit('error') is how grpc-js ends a server stream with a status; destroy() never sends one (the client hangs).
      if (!ctx.signal.aborted) call.emit('error', fail(err));
    } finally {
      ctx.done();
      if (release) release();
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

/** The server side of serviceDefinition: requests stay bytes until the handler decodes them (see decode). */
function serverDefinition(service: DescService): grpc.ServiceDefinition {
  const def = serviceDefinition(service);
  for (const m of Object.values(def)) m.requestDeserialize = (buf: Buffer) => buf;
  return def;
}

/** grpc.health.v1 service name for liveness probes (Kubernetes `grpc.service: liveness`). */
export const LIVENESS_SERVICE = 'liveness';

export interface GrpcServer {
  server: grpc.Server;
  health: HealthImplementation;
  port: number;
}

export async function startGrpcServer(addr: string, handlers: InventoryHandlers, options: GrpcServerOptions): Promise<GrpcServer> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.keepalive_time_ms': 60_000,
    'grpc.max_concurrent_streams': 4096,
  });
  const impl: grpc.UntypedServiceImplementation = {};
  for (const m of InventoryService.methods) impl[m.localName] = methodHandler(m, handlers, options);
  server.addService(serverDefinition(InventoryService), impl);

  // '' and the service name follow readiness (app.ts); LIVENESS_SERVICE is SERVING for as long as the process
  // answers, so a liveness probe never restarts a pod only because Redis, NATS or MySQL is away.
  const health = new HealthImplementation({ '': 'NOT_SERVING', [InventoryService.typeName]: 'NOT_SERVING', [LIVENESS_SERVICE]: 'SERVING' });
  health.addToServer(server);
  new ReflectionService(reflectionRoot() as never).addToServer(server);

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(addr, options.credentials ?? grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { server, health, port };
}
