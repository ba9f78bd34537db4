// Times every method of a store adapter (one histogram sample per call, labelled by method name: a fixed,
// small set) and counts the ones that fail. The wrapper is a plain object built once, with one wrapped
// function per method and its metric children bound then: no Proxy trap and no label lookup on the call
// path. `observers` see each successful answer in the same continuation as the timing (the level checks
// learn shard levels this way), so watching answers adds no layer and no promise of its own.
import type { FastCounter, FastHistogram } from './fast-metrics.js';
import { methodNames } from '../util/method-names.js';

export type StoreObservers = Partial<Record<string, (args: unknown[], result: unknown) => void>>;

export function timed<T extends object>(target: T, duration: FastHistogram, errors: FastCounter, observers: StoreObservers = {}): T {
  const wrapper: Record<string, unknown> = Object.create(target);
  for (const op of methodNames(target)) {
    const fn = (target as Record<string, (...a: unknown[]) => unknown>)[op]!;
    const timer = duration.child(op);
    const failures = errors.child(op);
    const seen = observers[op];
    const failed = (start: number, err: unknown) => {
      timer.observe((performance.now() - start) / 1000);
      failures.inc();
      throw err;
    };
    wrapper[op] = (...args: unknown[]) => {
      const start = performance.now();
      let result: unknown;
      try {
        result = fn.apply(target, args);
      } catch (err) {
        failures.inc();
        throw err;
      }
      if (!(result instanceof Promise)) return result;
      return result.then(
        (v) => {
          timer.observe((performance.now() - start) / 1000);
          if (seen) {
            try {
              seen(args, v);
            } catch {
              // Observing is best effort: the call itself succeeded and its answer must reach the caller.
            }
          }
          return v;
        },
        (err: unknown) => failed(start, err),
      );
    };
  }
  return wrapper as T;
}
