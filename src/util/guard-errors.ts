// Infrastructure adapters report their failures as UNAVAILABLE domain errors: a use case never has to know
// what an ioredis or mysql2 error looks like, and a client always gets a status it may retry.
import { DomainError, unavailable } from '../domain/errors.js';

export function guardErrors<T extends object>(target: T, what: string): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = value.apply(obj, args);
        } catch (err) {
          throw err instanceof DomainError ? err : unavailable(`${what} cannot be reached`, err);
        }
        if (result instanceof Promise) {
          return result.catch((err: unknown) => {
            throw err instanceof DomainError ? err : unavailable(`${what} cannot be reached`, err);
          });
        }
        return result;
      };
    },
  });
}
