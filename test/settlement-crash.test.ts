// A service process killed with SIGKILL while it relays and settles, then started again: nothing lost, nothing
// applied twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { connect } from 'nats';
import { createInventoryClient, type InventoryClient } from '../src/client/grpc-client.js';
import { settlementNames } from '../src/settlement/jetstream.js';
import { startTestApp, TEST_DB_URL, uniqueId, type TestApp } from './support/harness.js';
import { freePort } from './support/ports.js';
import { spawnTs } from './support/processes.js';
import { expectLedgerOfLoad, ledgerFigures, SaleLoad, settled, sleep, waitFor } from './support/settlement.js';

const namespace = uniqueId('n');
let observer: TestApp;
const children: ChildProcess[] = [];

async function serve(instanceId: string): Promise<{ child: ChildProcess; client: InventoryClient; logs: string[] }> {
  const grpcPort = await freePort();
  const child = spawnTs('src/main.ts', [], {
    SHARDSTOCK_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
    SHARDSTOCK_HTTP_ADDR: `127.0.0.1:${await freePort()}`,
    SHARDSTOCK_MYSQL_URL: TEST_DB_URL,
    SHARDSTOCK_NAMESPACE: namespace,
    SHARDSTOCK_INSTANCE_ID: instanceId,
    SHARDSTOCK_WORKERS: 'relay,settle,sweep',
    // Small batches keep both stages busy (a backlog in the outbox and in JetStream) when the kill lands.
    SHARDSTOCK_RELAY_BATCH: '20',
    SHARDSTOCK_SETTLE_BATCH: '20',
    SHARDSTOCK_SWEEP_INTERVAL_MS: '500',
    SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '2000',
    SHARDSTOCK_LOG_LEVEL: 'warn',
  });
  children.push(child);
  const logs: string[] = [];
  child.stdout!.on('data', (d) => logs.push(String(d)));
  child.stderr!.on('data', (d) => logs.push(String(d)));
  const client = createInventoryClient(`127.0.0.1:${grpcPort}`);
  await waitFor(
    'the service to answer',
    () =>
      client.getStock({ couponId: 'none' }).then(
        () => 'up',
        (e: { code?: number }) => (e.code === 5 ? 'up' : 'down'),
      ),
    (s) => s === 'up',
    30_000,
    200,
  );
  return { child, client, logs };
}

beforeAll(async () => {
  observer = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'observer' });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await observer?.close();
  const nc = await connect({ servers: 'nats://127.0.0.1:4222' });
  await (await nc.jetstreamManager()).streams.delete(settlementNames(namespace).stream).catch(() => {});
  await nc.close();
});

describe('a service process killed mid-settlement', () => {
  it('when the process is SIGKILLed while relaying and settling and then restarted, then every deduction and compensation is settled exactly once', async () => {
    const t0 = Date.now();
    const T = (what: string) => process.env.TEST_TRACE && console.log(`${Date.now() - t0} ms ${what}`);
    const first = await serve('crash-1');
    T('served');
    const id = uniqueId();
    await first.client.createCoupon({ couponId: id, totalStock: 1_000_000n, shardCount: 8 });
    let current = first.client;
    const load = new SaleLoad(() => current, id, 'k', 24).start();

    // Kill once settlement is under way but behind. A kill that finds both stages caught up (nothing in the
    // outbox or JetStream: the load paused for a moment on a busy machine) proves less than this test is for, so
    // the load goes on against a new process and the next kill tries again, up to three kills.
    let running = first;
    let atKill: Awaited<ReturnType<InventoryClient['reconcile']>>;
    let settledAtKill: Awaited<ReturnType<typeof ledgerFigures>>;
    for (let kill = 1; ; kill++) {
      await waitFor(
        'settlement to be under way',
        () => ledgerFigures(observer.app, id),
        (f) => f.deductRows >= 150 * kill,
        60_000,
        100,
      );
      T(`killing (${kill})`);
      running.child.kill('SIGKILL');
      await new Promise((r) => running.child.once('exit', r));
      await sleep(300);
      atKill = await observer.client.reconcile({ couponId: id });
      settledAtKill = await ledgerFigures(observer.app, id);
      if (atKill.outboxEvents + atKill.jetstreamPending > 0n || kill === 3) break;
      running = await serve(`crash-1.${kill}`);
      current = running.client;
    }
    // Something was still on its way in both stages' reach (outbox or JetStream), and some was settled. Not
    // compared with the answers the load got: settlement may have caught up with every answered deduction, and
    // what is in flight then is the calls the kill cut off before their answer (resolved below) and compensations.
    expect(atKill.outboxEvents + atKill.jetstreamPending).toBeGreaterThan(0n);
    expect(settledAtKill.deductRows).toBeGreaterThan(0);

    T(
      `at kill ${JSON.stringify({ outbox: Number(atKill.outboxEvents), js: Number(atKill.jetstreamPending), rows: settledAtKill.deductRows, ok: load.deducted.size })}`,
    );
    const second = await serve('crash-2');
    T('restarted');
    current = second.client;
    await sleep(1000);
    await load.stop();
    await load.resolveUnknown();

    T('resolved');
    await settled(second.client, id, 90_000);
    T('settled');
    const f = await expectLedgerOfLoad(observer.app, id, 1_000_000, load);
    const level = (await second.client.getStock({ couponId: id })).level!;
    expect(level.available).toBe(BigInt(f.remaining));
    expect(level.pendingSettlement).toBe(0n);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
  }, 180_000);
});
