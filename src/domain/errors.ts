// The failures the domain can report. Each transport maps `kind` to its own status code in exactly one
// place (src/transport/status.ts); nothing matches on message text.

export type ErrorKind =
  | 'invalid_argument'
  | 'not_found'
  | 'already_exists'
  | 'failed_precondition'
  | 'aborted'
  | 'unavailable'
  | 'deadline_exceeded'
  | 'resource_exhausted'
  | 'unimplemented'
  | 'unauthenticated'
  | 'permission_denied'
  | 'internal';

export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly kind: ErrorKind,
    message: string,
    options?: { cause?: unknown; retryAfterMs?: number | undefined },
  ) {
    super(message, options);
    this.retryAfterMs = options?.retryAfterMs;
  }

  /** When the caller may usefully try again (rate limits, load shedding, fenced shards); sent as `retry-after-ms`. */
  readonly retryAfterMs: number | undefined;
}

export const invalid = (field: string, why: string) => new DomainError('invalid_argument', `${field}: ${why}`);
export const notFound = (what: string) => new DomainError('not_found', what);
export const unavailable = (what: string, cause?: unknown) => new DomainError('unavailable', what, { cause });
