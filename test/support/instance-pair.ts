// Two instances on the same keys, as behind a load balancer: many test files race requests over both, and the
// start and close they each had word for word now live here so that the copies cannot drift apart.
import { startTestApp, type TestApp } from './harness.js';

/** Instances a and b on a's namespace; with `name`, their instance ids are `${name}-a` and `${name}-b`. If b
 * fails to start, a is closed before the error is thrown. */
export async function startInstancePair(env: Record<string, string> = {}, name?: string): Promise<[TestApp, TestApp]> {
  const id = (s: string): Record<string, string> => (name === undefined ? {} : { SHARDSTOCK_INSTANCE_ID: `${name}-${s}` });
  const a = await startTestApp({ ...env, ...id('a') });
  try {
    return [a, await startTestApp({ ...env, SHARDSTOCK_NAMESPACE: a.namespace, ...id('b') })];
  } catch (err) {
    await a.close();
    throw err;
  }
}

/** For afterAll: closes in the order given; an instance whose start failed is undefined here and skipped. */
export async function closeInstances(...apps: (TestApp | undefined)[]): Promise<void> {
  for (const app of apps) await app?.close();
}

/** Order timings for the attack files: a commit margin short enough that a commit always extends the item holds
 * first, and sweeps fast enough to end what a kill or a race leaves behind within the tests' waits. */
export const FAST_ORDER_ENV = {
  SHARDSTOCK_ORDER_COMMIT_MARGIN_MS: '1000',
  SHARDSTOCK_ORDER_SWEEP_MS: '100',
  SHARDSTOCK_HOLD_SWEEP_MS: '50',
};

/** The order suites' pair: both instances relay and settle, so that either can finish (or race) what the other
 * started. */
export const startOrderInstances = (name: string, env: Record<string, string>) =>
  startInstancePair({ ...env, SHARDSTOCK_WORKERS: 'relay,settle' }, name);
