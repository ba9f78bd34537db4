// The gap's decision alone (src/redis/call-gap.ts); test/batch-wait.test.ts runs it against the cluster.
import { describe, expect, it } from 'vitest';
import { holdAfter } from '../src/redis/call-gap.js';

const base = { gapMs: 15, from: 16 };

describe('holdAfter: when a master waits before its next call', () => {
  it('when the gap is off or the call is the first, then the next call leaves at once', () => {
    expect(holdAfter({ ...base, gapMs: 0, size: 64, sinceLastMs: 1, roundTripMs: 5 })).toBe(0);
    expect(holdAfter({ ...base, size: 64, sinceLastMs: undefined, roundTripMs: 5 })).toBe(0);
  });

  it('when requests arrive fast enough that the next call would carry gapFrom anyway, then it waits until the gap after this call left', () => {
    // 24 requests in the 10 ms since the last call, a 10 ms round trip: ~24 would be waiting, the gap holds 5 ms more.
    expect(holdAfter({ ...base, size: 24, sinceLastMs: 10, roundTripMs: 10 })).toBeCloseTo(5);
    expect(holdAfter({ ...base, size: 16, sinceLastMs: 2, roundTripMs: 2 })).toBeCloseTo(13);
  });

  it('when the gap itself made the call large but the rate is moderate, then the next call leaves at once (the gap does not keep itself on)', () => {
    // 16 requests gathered over a 15 ms gap, round trip 1 ms: without a gap a call would carry ~1.
    expect(holdAfter({ ...base, size: 16, sinceLastMs: 15, roundTripMs: 1 })).toBe(0);
    expect(holdAfter({ ...base, size: 15, sinceLastMs: 1, roundTripMs: 1 })).toBe(0);
  });

  it('when the call took as long as the gap, or all but a fraction of a millisecond, then there is nothing left to wait', () => {
    expect(holdAfter({ ...base, size: 64, sinceLastMs: 20, roundTripMs: 20 })).toBe(0);
    expect(holdAfter({ ...base, size: 64, sinceLastMs: 14.5, roundTripMs: 14.5 })).toBe(0);
  });
});
