import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { adapterError, guardErrors } from '../src/util/guard-errors.js';
import { combineObservers, timed } from '../src/observability/timed-store.js';
import { FastCounter, FastHistogram } from '../src/observability/fast-metrics.js';
import { DomainError, notFound } from '../src/domain/errors.js';

class Adapter {
  calls = 0;
  async fails(): Promise<void> {
    this.calls++;
    throw new Error('ECONNREFUSED');
  }
  throwsNow(): void {
    throw new Error('socket closed');
  }
  async domain(): Promise<void> {
    throw notFound('coupon x does not exist');
  }
  async ok(n: number): Promise<number> {
    this.calls++;
    return n * 2;
  }
}

describe('guardErrors', () => {
  it('when an adapter fails, then the caller gets UNAVAILABLE naming the dependency; domain errors pass through', async () => {
    const a = new Adapter();
    const g = guardErrors(a, 'Redis');
    await expect(g.fails()).rejects.toMatchObject({ kind: 'unavailable', message: 'Redis cannot be reached' });
    expect(() => g.throwsNow()).toThrow(DomainError);
    await expect(g.domain()).rejects.toMatchObject({ kind: 'not_found' });
    expect(await g.ok(21)).toBe(42);
    // Methods run on the adapter itself (its state), not on a copy.
    expect(a.calls).toBe(2);
    expect(g.calls).toBe(2);
  });
});

describe('timed with adapterError: the guarded, timed store in one layer', () => {
  const build = (observers = {}) => {
    const registry = new Registry();
    const duration = new FastHistogram('t_seconds', 'h', ['op'], [0.001, 1], registry);
    const errors = new FastCounter('t_errors_total', 'c', ['op'], registry);
    const a = new Adapter();
    const g = timed(a, duration, errors, { observers, mapError: adapterError('Redis') });
    return { a, g, duration, errors };
  };

  it('when an adapter fails, then the caller gets UNAVAILABLE naming the dependency, and the failure is timed and counted', async () => {
    const { a, g, duration, errors } = build();
    await expect(g.fails()).rejects.toMatchObject({ kind: 'unavailable', message: 'Redis cannot be reached' });
    expect(() => g.throwsNow()).toThrow(DomainError);
    expect(() => g.throwsNow()).toThrow('Redis cannot be reached');
    await expect(g.domain()).rejects.toMatchObject({ kind: 'not_found', message: 'coupon x does not exist' });
    expect(await g.ok(21)).toBe(42);
    expect(a.calls).toBe(2);
    expect(errors.child('fails').value).toBe(1);
    expect(errors.child('throwsNow').value).toBe(2);
    expect(errors.child('domain').value).toBe(1);
    expect(errors.child('ok').value).toBe(0);
    // Rejections and answers are timed; a synchronous throw never started a call worth timing.
    expect(duration.child('fails').count).toBe(1);
    expect(duration.child('domain').count).toBe(1);
    expect(duration.child('ok').count).toBe(1);
    expect(duration.child('throwsNow').count).toBe(0);
  });

  it('when an observer watches a method, then it sees each answer with its arguments, and its own failure never fails the call', async () => {
    const seen: Array<[unknown[], unknown]> = [];
    const { g } = build({
      ok: (args: unknown[], result: unknown) => {
        seen.push([args, result]);
        if (result === 8) throw new Error('observer bug');
      },
    });
    expect(await g.ok(1)).toBe(2);
    expect(await g.ok(4)).toBe(8);
    await expect(g.fails()).rejects.toMatchObject({ kind: 'unavailable' });
    expect(seen).toEqual([
      [[1], 2],
      [[4], 8],
    ]);
  });

  it('when the store is wrapped, then the wrapper sits directly on the adapter: one layer, not a wrapper of a wrapper', () => {
    const { a, g } = build();
    expect(Object.getPrototypeOf(g)).toBe(a);
    expect(Object.hasOwn(g, 'ok')).toBe(true);
  });

  it('when two observer sets watch the same method, then both see each answer, even if the first one fails', async () => {
    const seen: string[] = [];
    const { g } = build(
      combineObservers(
        {
          ok: () => {
            seen.push('levels');
            throw new Error('observer bug');
          },
        },
        { ok: (_a: unknown[], r: unknown) => seen.push(`moves ${r}`), fails: () => seen.push('never') },
      ),
    );
    expect(await g.ok(2)).toBe(4);
    await expect(g.fails()).rejects.toMatchObject({ kind: 'unavailable' });
    expect(seen).toEqual(['levels', 'moves 4']);
  });
});
