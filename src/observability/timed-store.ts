// Times every method of a store adapter (one histogram sample per call, labelled by method name: a fixed,
// small set) and counts the ones that fail. The wrapper is a plain object built once, with one wrapped
// function per method and its metric children bound then: no Proxy trap and no label lookup on the call
// path. `observers` see each successful answer in the same continuation as the timing (the level checks
// learn shard levels this way), and `mapError` turns a failure into what the caller sees in the same
// continuation too (src/util/guard-errors.ts adapterError): timing, watching and guarding a store call cost
// one wrapper function and one promise link, where stacked wrappers would cost one of each per layer.
import type { FastCounter, FastHistogram } from './fast-metrics.js';
import { methodNames } from '../util/method-names.js';

export type StoreObservers = Partial<Record<string, (args: unknown[], result: unknown) => void>>;

export interface TimedOptions {
  observers?: StoreObservers;
  /** Applied to every failure, thrown or rejected, after it is counted. */
  mapError?: (err: unknown) => unknown;
}

export function timed<T extends object>(target: T, duration: FastHistogram, errors: FastCounter, options: TimedOptions = {}): T {
  const { observers = {}, mapError = (err: unknown) => err } = options;
  const wrapper: Record<string, unknown> = Object.create(target);
  for (const op of methodNames(target)) {
    const fn = (target as Record<string, (...a: unknown[]) => unknown>)[op]!;
    const timer = duration.child(op);
    const failures = errors.child(op);
    const seen = observers[op];
    const succeeded = seen
      ? (start: number, args: unknown[], v: unknown) => {
          timer.observe((performance.now() - start) / 1000);
          try {
            seen(args, v);
          } catch {
            // Observing is best effort: the call itself succeeded and its answer must reach the caller.
          }
          return v;
        }
      : (start: number, _args: unknown[], v: unknown) => {
          timer.observe((performance.now() - start) / 1000);
          return v;
        };
    const failed = (start: number, err: unknown): never => {
      timer.observe((performance.now() - start) / 1000);
      failures.inc();
      throw mapError(err);
    };
    wrapper[op] = (...args: unknown[]) => {
      const start = performance.now();
      let result: unknown;
      try {
        result = fn.apply(target, args);
      } catch (err) {
        failures.inc();
        throw mapError(err);
      }
      if (!(result instanceof Promise)) return result;
      return result.then(
        (v) => succeeded(start, args, v),
        (err: unknown) => failed(start, err),
      );
    };
  }
  return wrapper as T;
}

/** Several observer sets as one: a method watched by more than one set calls each in turn. */
export function combineObservers(...sets: StoreObservers[]): StoreObservers {
  const out: StoreObservers = {};
  for (const set of sets) {
    for (const [op, fn] of Object.entries(set)) {
      if (!fn) continue;
      const before = out[op];
      out[op] = before
        ? (args, result) => {
            try {
              before(args, result);
            } finally {
              fn(args, result);
            }
          }
        : fn;
    }
  }
  return out;
}
