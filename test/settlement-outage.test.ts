// NATS stopped and restarted during a run; MariaDB unreachable for several seconds during a run: the backlog
// grows, then drains, and the end state is consistent. The shared servers are never touched: NATS is a
// private nats-server with its own store directory, MariaDB is reached through a proxy the test cuts.
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from 'nats';
import { settlementNames } from '../src/settlement/jetstream.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { PrivateNats } from './support/private-nats.js';
import { expectLedgerOfLoad, ledgerFigures, SaleLoad, settled, sleep, waitFor } from './support/settlement.js';
import { TcpProxy } from './support/tcp-proxy.js';

const WORKERS = { SHARDSTOCK_WORKERS: 'relay,settle,sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '500', SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '2000' };
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A coupon selling under a running load, once its settlement is under way. */
async function saleUnderWay(t: TestApp, prefix: string): Promise<{ id: string; total: number; load: SaleLoad }> {
  const id = uniqueId();
  const total = 1_000_000;
  await t.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 8 });
  const load = new SaleLoad(() => t.client, id, prefix, 16).start();
  await waitFor(
    'settlement to be under way',
    () => ledgerFigures(t.app, id),
    (f) => f.deductRows >= 50,
    30_000,
    100,
  );
  return { id, total, load };
}

async function expectSettledExactly(t: TestApp, id: string, total: number, load: SaleLoad): Promise<void> {
  await settled(t.client, id, 90_000);
  await expectLedgerOfLoad(t.app, id, total, load);
  expect((await t.client.getStock({ couponId: id })).level!.pendingSettlement).toBe(0n);
}

describe('outages during a run', () => {
  it('when NATS is killed and restarted mid-run, then the outbox backlog grows, drains, and every event is settled once', async () => {
    const nats = await PrivateNats.launch();
    cleanups.push(() => nats.close());
    const t = await startTestApp({ ...WORKERS, SHARDSTOCK_NATS_URL: nats.url, SHARDSTOCK_INSTANCE_ID: 'nats-outage' });
    cleanups.push(() => t.close());
    const { id, total, load } = await saleUnderWay(t, 'n');

    await nats.kill();
    // Deducts go on (they need Redis only); their events pile up in the outbox.
    const during = await waitFor(
      'the outbox backlog to grow',
      () => shardState(t.app, id),
      (s) => s.outboxEvents >= 200,
      30_000,
      200,
    );
    await sleep(2000);
    expect((await shardState(t.app, id)).outboxEvents).toBeGreaterThan(during.outboxEvents);
    expect(load.deducted.size).toBeGreaterThan((await ledgerFigures(t.app, id)).deductRows + 200);

    await nats.start();
    await sleep(1000);
    await load.stop();
    await load.resolveUnknown();
    await expectSettledExactly(t, id, total, load);
    expect(t.app.settlement.stats.relay.publishFailures).toBeGreaterThan(0);
  }, 180_000);

  it('when MariaDB is unreachable for several seconds mid-run, then JetStream holds the backlog, it drains, and every event is settled once', async () => {
    const proxy = new TcpProxy('127.0.0.1', 3306);
    const port = await proxy.start();
    cleanups.push(() => proxy.close());
    const t = await startTestApp({
      ...WORKERS,
      SHARDSTOCK_MYSQL_URL: `mysql://root@127.0.0.1:${port}/shardstock_test`,
      SHARDSTOCK_INSTANCE_ID: 'mysql-outage',
    });
    cleanups.push(async () => {
      await t.close();
      const nc = await connect({ servers: 'nats://127.0.0.1:4222' });
      await (await nc.jetstreamManager()).streams.delete(settlementNames(t.namespace).stream).catch(() => {});
      await nc.close();
    });
    const { id, total, load } = await saleUnderWay(t, 'm');

    proxy.cut();
    const during = await waitFor(
      'JetStream to hold a backlog',
      () => t.app.settlement.stream.pending(id),
      (n) => n >= 200,
      30_000,
      200,
    );
    await sleep(3000);
    expect(await t.app.settlement.stream.pending(id)).toBeGreaterThan(during);

    proxy.restore();
    await sleep(500);
    await load.stop();
    await load.resolveUnknown();
    await expectSettledExactly(t, id, total, load);
    expect(t.app.settlement.stats.settle.failedBatches).toBeGreaterThan(0);
  }, 180_000);
});
