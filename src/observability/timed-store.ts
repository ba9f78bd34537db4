// Times every method of a store adapter (one histogram sample per call, labelled by method name: a fixed,
// small set) and counts the ones that fail. The wrapper is a plain object built once, with one wrapped
// function per method: no Proxy trap on the call path.
import type { FastCounter, FastHistogram } from './fast-metrics.js';
import { methodNames } from '../util/method-names.js';

export function timed<T extends object>(target: T, duration: FastHistogram, errors: FastCounter): T {
  const wrapper: Record<string, unknown> = Object.create(target);
  for (const op of methodNames(target)) {
    const fn = (target as Record<string, (...a: unknown[]) => unknown>)[op]!;
    const timer = duration.child(op);
    const failures = errors.child(op);
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
          return v;
        },
        (err: unknown) => {
          timer.observe((performance.now() - start) / 1000);
          failures.inc();
          throw err;
        },
      );
    };
  }
  return wrapper as T;
}
