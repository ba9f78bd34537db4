// The one mapping from domain failures to gRPC status, used by both ports (grpc-server.ts renders it as a
// grpc-js error with trailers, connect-routes.ts as a ConnectError; Connect's Code enum has the same
// numbers). Causes are logged, never sent: a client sees the domain message only.
import { DomainError, type ErrorKind } from '../domain/errors.js';
import { GrpcCode } from '../protocol/status-codes.js';

export { codeName, GrpcCode } from '../protocol/status-codes.js';

const BY_KIND: Record<ErrorKind, number> = {
  invalid_argument: GrpcCode.INVALID_ARGUMENT,
  not_found: GrpcCode.NOT_FOUND,
  already_exists: GrpcCode.ALREADY_EXISTS,
  failed_precondition: GrpcCode.FAILED_PRECONDITION,
  aborted: GrpcCode.ABORTED,
  unavailable: GrpcCode.UNAVAILABLE,
  deadline_exceeded: GrpcCode.DEADLINE_EXCEEDED,
  resource_exhausted: GrpcCode.RESOURCE_EXHAUSTED,
  unimplemented: GrpcCode.UNIMPLEMENTED,
  unauthenticated: GrpcCode.UNAUTHENTICATED,
  permission_denied: GrpcCode.PERMISSION_DENIED,
  internal: GrpcCode.INTERNAL,
};

export interface RpcStatus {
  code: number;
  message: string;
  /** Response metadata (gRPC trailers / Connect error metadata), e.g. `retry-after-ms`. */
  metadata?: Record<string, string>;
  /** Set when the error was not a domain error: log it. */
  unexpected?: unknown;
}

export function toStatus(err: unknown): RpcStatus {
  if (err instanceof DomainError) {
    const status: RpcStatus = { code: BY_KIND[err.kind], message: err.message };
    // A refusal that carries a retry hint (fenced shard, shed load) is expected: not logged as a failure.
    if ((err.kind === 'unavailable' && err.retryAfterMs === undefined) || err.kind === 'internal') status.unexpected = err.cause ?? err;
    if (err.retryAfterMs !== undefined) status.metadata = { 'retry-after-ms': String(Math.max(0, Math.ceil(err.retryAfterMs))) };
    return status;
  }
  return { code: GrpcCode.INTERNAL, message: 'internal error', unexpected: err };
}
