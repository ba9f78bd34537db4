// How a logical call that did not get an answer it could return ends: one error carrying the gRPC status of
// the last attempt, the request id the attempts shared, how many there were and why the client stopped.
import type { Metadata } from '@grpc/grpc-js';
import type { GiveUpReason } from './retry-policy.js';

/** Status code -> name, for messages (grpc-js numbers). */
const NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
];

export interface CallErrorInit {
  method: string;
  code: number;
  details: string;
  metadata: Metadata | undefined;
  requestId: string | undefined;
  attempts: number;
  reason: GiveUpReason | 'cancelled';
  inDoubt: boolean;
  cause: unknown;
}

export class ShardstockCallError extends Error {
  override name = 'ShardstockCallError';
  /** gRPC status code of the last attempt (CANCELLED when the caller's signal aborted). */
  readonly code: number;
  /** The status message of the last attempt, as the server (or grpc-js) wrote it. */
  readonly details: string;
  /** Trailers of the last attempt (e.g. `retry-after-ms`). */
  readonly metadata: Metadata | undefined;
  readonly method: string;
  /** The request id every attempt carried: retry later with it and a Deduct stays one deduction. */
  readonly requestId: string | undefined;
  readonly attempts: number;
  /** `answer`: the service said no (never retried); `attempts` / `deadline`: retries ran out; `cancelled`. */
  readonly reason: GiveUpReason | 'cancelled';
  /** A write may have been applied: some attempt failed after the request could have reached the service.
   * The outcome is unknown until the same request id is sent again. */
  readonly inDoubt: boolean;

  constructor(i: CallErrorInit) {
    const tries = i.attempts > 1 ? ` (gave up after ${i.attempts} attempts${i.requestId ? ` with request id ${i.requestId}` : ''})` : '';
    super(`${i.method}: ${NAMES[i.code] ?? i.code}: ${i.details}${i.reason === 'answer' ? '' : tries}`, { cause: i.cause });
    this.code = i.code;
    this.details = i.details;
    this.metadata = i.metadata;
    this.method = i.method;
    this.requestId = i.requestId;
    this.attempts = i.attempts;
    this.reason = i.reason;
    this.inDoubt = i.inDoubt;
  }
}

/** A bearer token would go in plaintext to a machine other than this one. */
export class PlaintextTokenError extends Error {
  override name = 'PlaintextTokenError';
  constructor(readonly address: string) {
    super(`refusing to send a bearer token in plaintext to ${address} (not a loopback address): use TLS`);
  }
}
