// Infrastructure adapters report their failures as UNAVAILABLE domain errors: a use case never has to know
// what an ioredis or mysql2 error looks like, and a client always gets a status it may retry. The wrapper is
// built once with one function per method (it sits on the Deduct hot path: no Proxy trap, no closure per call).
// The Redis store is guarded by timed() itself (adapterError as its mapError), so a store call pays for one
// wrapper and one promise link, not two.
import { DomainError, unavailable } from '../domain/errors.js';
import { methodNames } from './method-names.js';

/** What a caller sees when the adapter for `what` fails: domain errors as they are, anything else UNAVAILABLE. */
export function adapterError(what: string): (err: unknown) => DomainError {
  return (err) => (err instanceof DomainError ? err : unavailable(`${what} cannot be reached`, err));
}

export function guardErrors<T extends object>(target: T, what: string): T {
  const wrap = adapterError(what);
  const rethrow = (err: unknown): never => {
    throw wrap(err);
  };
  const wrapper: Record<string, unknown> = Object.create(target);
  for (const name of methodNames(target)) {
    const fn = (target as Record<string, (...a: unknown[]) => unknown>)[name]!;
    wrapper[name] = (...args: unknown[]) => {
      let result: unknown;
      try {
        result = fn.apply(target, args);
      } catch (err) {
        throw wrap(err);
      }
      return result instanceof Promise ? result.catch(rethrow) : result;
    };
  }
  return wrapper as T;
}
