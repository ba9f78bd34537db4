// Infrastructure adapters report their failures as UNAVAILABLE domain errors: a use case never has to know
// what an ioredis or mysql2 error looks like, and a client always gets a status it may retry. The wrapper is
// built once with one function per method (it sits on the Deduct hot path: no Proxy trap, no closure per call).
import { DomainError, unavailable } from '../domain/errors.js';
import { methodNames } from './method-names.js';

export function guardErrors<T extends object>(target: T, what: string): T {
  const wrap = (err: unknown) => (err instanceof DomainError ? err : unavailable(`${what} cannot be reached`, err));
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
