// Fault 2 of the reliability issue: one of two service instances is SIGKILLed in the middle of a flash sale
// (mid-request, mid-move, mid-relay, mid-settlement). Clients retry what failed on the survivor with the same
// request_id. Every DEDUCTED answer any client received must end up in the ledger exactly once, and MySQL,
// Redis and the clients must agree on the count.
import { afterAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { status } from '@grpc/grpc-js';
import { createInventoryClient, type InventoryClient } from '../src/client/grpc-client.js';
import { shardState } from '../test/support/inspect.js';
import { startTestApp, TEST_DB_URL, uniqueId, type TestApp } from '../test/support/harness.js';
import { freePort } from '../test/support/ports.js';
import { spawnTs } from '../test/support/processes.js';
import { ledgerFigures, settled, waitFor } from '../test/support/settlement.js';
import { flashLoad } from './support/flash-load.js';
import { recordsAndOutbox } from './support/redis-records.js';

const children: ChildProcess[] = [];
const clients: InventoryClient[] = [];
let observer: TestApp | undefined;
afterAll(async () => {
  for (const c of clients) c.close();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await observer?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A service instance as its own OS process (`src/main.ts`), all workers on, on free ports. */
async function spawnInstance(namespace: string, name: string): Promise<{ proc: ChildProcess; client: InventoryClient }> {
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const proc = spawnTs('src/main.ts', [], {
    SHARDSTOCK_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
    SHARDSTOCK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
    SHARDSTOCK_MYSQL_URL: TEST_DB_URL,
    SHARDSTOCK_NAMESPACE: namespace,
    SHARDSTOCK_INSTANCE_ID: name,
    SHARDSTOCK_SWEEP_INTERVAL_MS: '250',
    SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '1000',
    SHARDSTOCK_LOG_LEVEL: 'warn',
  });
  children.push(proc);
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const client = createInventoryClient(`127.0.0.1:${grpcPort}`);
  clients.push(client);
  const until = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`instance ${name} exited ${proc.exitCode}: ${stderr}`);
    const code = await client.getStock({ couponId: 'probe' }, { deadlineMs: 1000 }).then(
      () => 0,
      (e: { code: number }) => e.code,
    );
    if (code === status.NOT_FOUND) return { proc, client };
    if (Date.now() > until) throw new Error(`instance ${name} did not serve within 30 s: ${stderr}`);
    await sleep(200);
  }
}

describe('a service instance SIGKILLed during a flash sale', () => {
  it('when one of two instances dies mid-load, then every DEDUCTED answer any client got is in the ledger exactly once, and ledger, Redis and clients agree', async () => {
    const namespace = `f${uniqueId('').slice(2)}`;
    const [a, b] = await Promise.all([spawnInstance(namespace, 'crash-a'), spawnInstance(namespace, 'crash-b')]);
    const stock = 1500;
    const couponId = uniqueId('crash');
    await a.client.createCoupon({ couponId, totalStock: BigInt(stock), shardCount: 8 });
    const ids = Array.from({ length: 2200 }, (_, i) => `k${i}`);

    let alive = [a.client, b.client];
    let killedAt = 0;
    const r = await flashLoad({
      clients: () => alive,
      couponId,
      requestIds: ids,
      concurrency: 64,
      giveUpAt: Date.now() + 90_000,
      onResolved: (n) => {
        if (n !== 500) return;
        b.proc.kill('SIGKILL');
        killedAt = Date.now();
        // The balancer notices the dead backend a little later: some attempts still go to it.
        void sleep(300).then(() => (alive = [a.client]));
      },
    });
    expect(killedAt).toBeGreaterThan(0);
    expect(r.unresolved).toEqual([]);
    // The crash overlapped the load: attempts before it, and after the balancer had dropped the dead instance.
    expect(r.attempts.filter((x) => x.at < killedAt).length).toBeGreaterThan(0);
    expect(r.attempts.filter((x) => x.at > killedAt + 300).length).toBeGreaterThan(0);
    // Calls cut off by the crash, and those sent to the dead instance before the balancer noticed, fail
    // UNAVAILABLE (retryable with the same request_id), never anything a client would give up on.
    expect(r.attempts.filter((x) => x.code !== 0 && x.at < killedAt).map((x) => x.message)).toEqual([]);
    expect(Object.keys(Object.fromEntries([...r.errorCodes].map(([c, n]) => [status[c] ?? c, n])))).toEqual(
      r.errorCodes.size > 0 ? ['UNAVAILABLE'] : [],
    );
    expect(r.errorCodes.get(status.UNAVAILABLE) ?? 0).toBeGreaterThan(0);
    // Only attempts caught by the crash failed; the survivor answered every retry definitively.
    const failedOnSurvivor = r.attempts.filter((x) => x.code !== 0 && x.at > killedAt + 2000);
    expect(failedOnSurvivor).toEqual([]);
    expect([...r.firstDeductions.values()].every((n) => n === 1)).toBe(true);
    expect(r.deducted.size).toBeLessThanOrEqual(stock);

    // Redis: every DEDUCTED answer is recorded, nothing else is, and the shards add up.
    observer = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace });
    const { recorded } = await recordsAndOutbox(observer.app, couponId, ids);
    expect([...recorded].sort()).toEqual([...r.deducted].sort());
    await waitFor(
      'moves left by the dead instance to be swept',
      () => shardState(observer!.app, couponId),
      (s) => s.inTransit === 0,
      20_000,
    );
    const state = await shardState(observer.app, couponId);
    expect(state.net).toBe(r.deducted.size);
    expect(state.available + state.net).toBe(stock);

    // Settlement on the survivor finishes what the dead instance had claimed (relay and settle).
    const rec = await settled(a.client, couponId, 60_000);
    const ledger = await ledgerFigures(observer.app, couponId);
    const ledgerIds = new Set(
      (
        await observer.app.orm.em
          .fork()
          .execute<{ request_id: string }[]>("select request_id from stock_ledger where coupon_id = ? and kind = 'DEDUCT'", [couponId])
      ).map((x) => x.request_id),
    );
    expect([...r.deducted].filter((id) => !ledgerIds.has(id))).toEqual([]);
    expect(ledgerIds.size).toBe(r.deducted.size);
    expect(ledger.duplicates).toBe(0);
    expect(ledger.deductUnits).toBe(r.deducted.size);
    expect(ledger.remaining).toBe(stock - r.deducted.size);
    expect(ledger.anomalies).toEqual([]);
    console.log(
      '[faults] instance SIGKILLed:',
      JSON.stringify({
        deducted: r.deducted.size,
        refused: r.refused.size,
        failedAttempts: Object.fromEntries([...r.errorCodes].map(([c, n]) => [status[c] ?? c, n])),
        reconcile: { consistent: rec.consistent, ledgerDeducted: Number(rec.ledgerDeducted), redisDrift: Number(rec.redisDrift) },
      }),
    );
  });
});
