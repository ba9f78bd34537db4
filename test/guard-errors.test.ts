import { describe, expect, it } from 'vitest';
import { guardErrors } from '../src/util/guard-errors.js';
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
