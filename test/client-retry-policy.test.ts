// The client's retry decision without a server: which failures are retried, how long the client waits, and
// when it gives up (the rules test/client.test.ts exercises against real instances).
import { status as S } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { backoffMs, DEFAULT_RETRY_POLICY as P, decideRetry, isRetryable, parseRetryAfter } from '../src/client/retry-policy.js';

const fail = (code: number, retryAfterMs?: number, attemptTimedOut = false) => ({ code, retryAfterMs, attemptTimedOut });

describe('which failures are retried', () => {
  it('when the failure is the transport or capacity, then it is retried; an answer never is', () => {
    expect(isRetryable(fail(S.UNAVAILABLE))).toBe(true);
    expect(isRetryable(fail(S.ABORTED))).toBe(true);
    expect(isRetryable(fail(S.RESOURCE_EXHAUSTED, 200))).toBe(true);
    expect(isRetryable(fail(S.DEADLINE_EXCEEDED, undefined, true))).toBe(true);
    for (const code of [S.INVALID_ARGUMENT, S.NOT_FOUND, S.FAILED_PRECONDITION, S.UNAUTHENTICATED, S.INTERNAL, S.UNKNOWN, S.CANCELLED]) {
      expect(isRetryable(fail(code)), String(code)).toBe(false);
    }
    // A fixed limit (message size) and the caller's own deadline are answers too.
    expect(isRetryable(fail(S.RESOURCE_EXHAUSTED))).toBe(false);
    expect(isRetryable(fail(S.DEADLINE_EXCEEDED))).toBe(false);
  });
});

describe('how long the client waits', () => {
  it('when retries go on, then the backoff doubles up to its cap, each jittered within its upper half', () => {
    const lo = (n: number) => backoffMs(n, P, () => 0);
    const hi = (n: number) => backoffMs(n, P, () => 1);
    expect([1, 2, 3, 4].map(hi)).toEqual([50, 100, 200, 400]);
    expect([1, 2, 3, 4].map(lo)).toEqual([25, 50, 100, 200]);
    expect(hi(20)).toBe(P.maxBackoffMs);
  });

  it('when the server sent retry-after-ms, then the wait is at least that (up to 20% more), and at least the backoff', () => {
    for (const r of [0, 0.5, 1]) {
      const d = decideRetry(fail(S.UNAVAILABLE, 300), 1, 10_000, P, () => r);
      expect(d).toEqual({ retry: true, delayMs: Math.ceil(300 * (1 + r * 0.2)) });
    }
    const late = decideRetry(fail(S.UNAVAILABLE, 10), 6, 10_000, P, () => 1);
    expect(late).toEqual({ retry: true, delayMs: backoffMs(6, P, () => 1) });
  });
});

describe('when the client gives up', () => {
  it('when the wait would outlast the deadline, or the attempts are used up, then it stops with the reason', () => {
    expect(decideRetry(fail(S.RESOURCE_EXHAUSTED, 500), 1, 400, P)).toEqual({ retry: false, reason: 'deadline' });
    expect(decideRetry(fail(S.UNAVAILABLE), P.maxAttempts, 10_000, P)).toEqual({ retry: false, reason: 'attempts' });
    expect(decideRetry(fail(S.NOT_FOUND), 1, 10_000, P)).toEqual({ retry: false, reason: 'answer' });
  });

  it('when retry-after-ms is malformed, then it is ignored', () => {
    expect([parseRetryAfter('250'), parseRetryAfter('x'), parseRetryAfter('-5'), parseRetryAfter(undefined)]).toEqual([
      250,
      undefined,
      undefined,
      undefined,
    ]);
  });
});
