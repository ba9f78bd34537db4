// Retries a call refused UNAVAILABLE or ABORTED (a recovery's pause, a failover fence, contention) with the same
// arguments, so the same request ids, as the typed client does; any other failure is thrown at once.
import { type ServiceError, status } from '@grpc/grpc-js';
import { sleep } from './settlement.js';

export async function retryUnavailable<T>(call: () => Promise<T>, attempts = 30, maxJitterMs = 50): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (e) {
      const code = (e as ServiceError).code;
      if (attempt >= attempts || (code !== status.UNAVAILABLE && code !== status.ABORTED)) throw e;
      await sleep(20 + Math.random() * maxJitterMs);
    }
  }
}
