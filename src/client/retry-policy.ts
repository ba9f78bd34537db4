// When a failed attempt is tried again, and after how long: a pure decision with no I/O, so every rule is
// unit-tested without a server. Only failures of the transport or of capacity are retried — a status that is
// the service's answer (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, ...) would be the same answer again.
// Every retry reuses the call's request id, so a retried Deduct that had in fact been applied is a replay.

import { GrpcCode } from '../protocol/status-codes.js';

/** gRPC status codes (the shared table, src/protocol/status-codes.ts: the client loads no server module). */
export const Code = GrpcCode;

export interface RetryPolicy {
  /** Attempts per logical call, the first included; 1 = never retry. Default 10 (with the default backoff,
   *  about as long as the default 10 s deadline: the deadline is what bounds a call). */
  maxAttempts: number;
  /** Backoff before the first retry, in ms; doubled for each further one. Default 50. */
  initialBackoffMs: number;
  /** Longest backoff, in ms (a server's `retry-after-ms` may ask for longer and is honoured). Default 2000. */
  maxBackoffMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({ maxAttempts: 10, initialBackoffMs: 50, maxBackoffMs: 2000 });

/** What one failed attempt said. */
export interface AttemptFailure {
  code: number;
  /** The server's `retry-after-ms` trailer, if it sent one. */
  retryAfterMs: number | undefined;
  /** The attempt ran out of its own timeout while the logical call still had time. */
  attemptTimedOut: boolean;
}

export type GiveUpReason = 'answer' | 'attempts' | 'deadline';

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: GiveUpReason };

/** Transport and capacity failures; everything else is an answer. RESOURCE_EXHAUSTED counts only with a
 * `retry-after-ms` (a rate limit); without one it is a fixed limit such as the message size. */
export function isRetryable(f: AttemptFailure): boolean {
  switch (f.code) {
    case Code.UNAVAILABLE:
    case Code.ABORTED:
      return true;
    case Code.RESOURCE_EXHAUSTED:
      return f.retryAfterMs !== undefined;
    case Code.DEADLINE_EXCEEDED:
      return f.attemptTimedOut;
    default:
      return false;
  }
}

/** Exponential backoff with equal jitter (half fixed, half random), so callers refused together spread out
 * without ever retrying at once. */
export function backoffMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** Math.max(0, retry - 1));
  return ceiling / 2 + (random() * ceiling) / 2;
}

/**
 * `attempt`: attempts made so far (1 after the first); `msLeft`: time left of the logical call's deadline.
 * A server's `retry-after-ms` is a floor (plus up to 20% jitter); a wait that would use up the deadline is
 * not started: the call gives up at once with what it has.
 */
export function decideRetry(
  f: AttemptFailure,
  attempt: number,
  msLeft: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): RetryDecision {
  if (!isRetryable(f)) return { retry: false, reason: 'answer' };
  if (attempt >= policy.maxAttempts) return { retry: false, reason: 'attempts' };
  const backoff = backoffMs(attempt, policy, random);
  // The server's wait is a floor, never a replacement for backing off: callers shed together would otherwise
  // all come back after the same 50 ms, and be shed together again.
  const delayMs = f.retryAfterMs === undefined ? backoff : Math.max(f.retryAfterMs * (1 + random() * 0.2), backoff);
  if (delayMs >= msLeft) return { retry: false, reason: 'deadline' };
  return { retry: true, delayMs: Math.ceil(delayMs) };
}

/** The `retry-after-ms` value of a trailer, or undefined when absent or not a non-negative number. */
export function parseRetryAfter(raw: unknown): number | undefined {
  if (raw === undefined || raw === null) return undefined;
  const v = Number(String(raw));
  return Number.isFinite(v) && v >= 0 ? v : undefined;
}
