// Times every method of a store adapter (one histogram sample per call, labelled by method name: a fixed,
// small set) and counts the ones that fail. Wrapped functions are made once per method, not per call.
import type { Counter, Histogram } from 'prom-client';

export function timed<T extends object>(target: T, duration: Histogram<'op'>, errors: Counter<'op'>): T {
  const wrapped = new Map<string, (...args: unknown[]) => unknown>();
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      let fn = wrapped.get(prop);
      if (!fn) {
        const op = prop;
        const timer = duration.labels(op);
        const failures = errors.labels(op);
        fn = (...args: unknown[]) => {
          const start = performance.now();
          const done = () => timer.observe((performance.now() - start) / 1000);
          let result: unknown;
          try {
            result = (value as (...a: unknown[]) => unknown).apply(obj, args);
          } catch (err) {
            failures.inc();
            throw err;
          }
          if (!(result instanceof Promise)) return result;
          return result.then(
            (v) => {
              done();
              return v;
            },
            (err: unknown) => {
              done();
              failures.inc();
              throw err;
            },
          );
        };
        wrapped.set(prop, fn);
      }
      return fn;
    },
  });
}
