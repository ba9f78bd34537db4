// JetStream loses what it held: a private nats-server (own port, own store directory) is killed and comes back
// on an empty store. Events the relay had already published and removed from the outbox are then nowhere but in
// Redis (the shards' net counts and request records). The shared NATS is never touched.
import { afterAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { PrivateNats } from './support/private-nats.js';
import { ledgerFigures, sleep, waitFor } from './support/settlement.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe('JetStream loses published events', () => {
  it('when the events of 8 relayed deductions are lost with JetStream, then Reconcile reports them missing and a repair sends them to MySQL again without putting their units back on sale', async () => {
    const nats = await PrivateNats.launch();
    cleanups.push(() => nats.close());
    const natsUrl = nats.url;
    // Relay only: the events reach JetStream and leave the outbox, nothing settles them yet.
    const relay = await startTestApp({ SHARDSTOCK_WORKERS: 'relay', SHARDSTOCK_NATS_URL: natsUrl, SHARDSTOCK_SWEEP_INTERVAL_MS: '200' });
    const id = uniqueId();
    const total = 20;
    await relay.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 2 });
    // Plain and UUID request ids (the records store a UUID packed), one of them compensated.
    const first = Array.from({ length: 8 }, (_, i) => (i < 4 ? `first-${i}` : randomUUID()));
    let sold = 0;
    for (const requestId of first) {
      const r = await relay.client.deduct({ couponId: id, requestId, userId: 'u1', quantity: 1n });
      if (r.outcome === DeductOutcome.DEDUCTED) sold++;
    }
    expect(sold).toBe(8);
    expect((await relay.client.compensate({ couponId: id, requestId: first[5]!, reason: 'refund' })).outcome).toBe(
      CompensateOutcome.COMPENSATED,
    );
    await waitFor(
      'the relay to hand every event to JetStream',
      () => relay.client.reconcile({ couponId: id }),
      (r) => r.outboxEvents === 0n && r.jetstreamPending === 9n,
      20_000,
    );
    await relay.close();

    await nats.restartEmpty();
    const t = await startTestApp({
      SHARDSTOCK_NAMESPACE: relay.namespace,
      SHARDSTOCK_WORKERS: 'relay,settle',
      SHARDSTOCK_NATS_URL: natsUrl,
      SHARDSTOCK_SWEEP_INTERVAL_MS: '200',
    });
    cleanups.push(() => t.close());
    await sleep(1000);

    // Redis sold 7 net, MySQL knows none of it and nothing is on its way: Reconcile must not call that consistent.
    const seen = await t.client.reconcile({ couponId: id });
    expect(seen.inFlightNet).toBe(0n);
    expect(seen.settledRemaining).toBe(BigInt(total));
    expect(seen.redisAvailable).toBe(BigInt(total - 7));
    expect(seen.consistent).toBe(false);

    // The operator's repair: the 7 units were sold (their buyers hold DEDUCTED answers); none may go back on
    // sale, and the 8 deductions and the compensation, still in the shards' request records, reach MySQL.
    const repaired = await t.client.reconcile({ couponId: id, repair: true });
    expect(repaired.repair?.restoredUnits ?? 0n).toBe(0n);
    expect((await shardState(t.app, id)).available).toBe(total - 7);
    const after = await waitFor(
      'the lost events to settle',
      () => ledgerFigures(t.app, id),
      (f) => f.deductRows === 8 && f.compensateRows === 1,
      20_000,
    );
    expect([after.deductUnits, after.compensateUnits, after.remaining]).toEqual([8, 1, total - 7]);
    // A second repair finds nothing lost and changes nothing.
    const again = await t.client.reconcile({ couponId: id, repair: true });
    expect(again.consistent).toBe(true);
    expect((await ledgerFigures(t.app, id)).deductRows).toBe(8);
    expect((await t.client.reconcile({ couponId: id })).consistent).toBe(true);

    // Then the rest of the stock sells, and not one unit more.
    for (let i = 0; i < 30; i++) {
      const r = await t.client.deduct({ couponId: id, requestId: `then-${i}`, quantity: 1n });
      if (r.outcome === DeductOutcome.DEDUCTED) sold++;
    }
    // 21 DEDUCTED answers, one of them compensated: 20 units.
    expect(sold).toBe(total + 1);
    await waitFor(
      'every sale to settle',
      () => ledgerFigures(t.app, id),
      (f) => f.deductRows === total + 1,
      30_000,
    );
    const f = await ledgerFigures(t.app, id);
    expect(f.anomalies).toEqual([]);
    expect(f.duplicates).toBe(0);
    expect(f.remaining).toBe(0);
    const end = await t.client.reconcile({ couponId: id });
    expect([end.redisAvailable, end.redisNetDeducted, end.settledRemaining, end.inFlightNet]).toEqual([0n, 20n, 0n, 0n]);
    expect(end.consistent).toBe(true);
  });

  it('when NATS comes back on an empty store under a running instance, then later deductions are still relayed and settled', async () => {
    const nats = await PrivateNats.launch();
    cleanups.push(() => nats.close());
    const t = await startTestApp({
      SHARDSTOCK_WORKERS: 'relay,settle',
      SHARDSTOCK_NATS_URL: nats.url,
      SHARDSTOCK_SWEEP_INTERVAL_MS: '200',
    });
    cleanups.push(() => t.close());
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2 });
    for (let i = 0; i < 5; i++) await t.client.deduct({ couponId: id, requestId: `before-${i}`, quantity: 1n });
    await waitFor(
      'the first 5 to settle',
      () => ledgerFigures(t.app, id),
      (f) => f.deductRows === 5,
      20_000,
    );

    await nats.restartEmpty();
    for (let i = 0; i < 5; i++) await t.client.deduct({ couponId: id, requestId: `after-${i}`, quantity: 1n });
    const f = await waitFor(
      'the 5 after the restart to settle',
      () => ledgerFigures(t.app, id),
      (x) => x.deductRows === 10,
      30_000,
    ).catch(async (err: Error) => {
      const r = await t.client.reconcile({ couponId: id });
      throw new Error(`${err.message}; outbox ${r.outboxEvents}, jetstream ${r.jetstreamPending}`);
    });
    expect(f.remaining).toBe(10);
    expect(f.duplicates).toBe(0);
  });
});
