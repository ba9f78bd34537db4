// Settlement end to end on the real stack: Redis outbox -> relay -> JetStream -> settler -> MySQL ledger, and
// Reconcile over all of it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, headers, type NatsConnection, type JsMsg } from 'nats';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { LEVEL_RECORD_TTL_MS } from '../src/domain/admin.js';
import { homeShard, shardRef } from '../src/domain/routing.js';
import { settlementNames } from '../src/settlement/jetstream.js';
import { encodeEvent, eventId, type SettlementEvent } from '../src/settlement/event.js';
import { Settler } from '../src/settlement/settle/settler.js';
import { RedisRefusalStore } from '../src/settlement/settle/refusal-store.js';
import { newSettlementStats } from '../src/settlement/stats.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { drainedReconcile, ledgerFigures, settled, waitFor } from './support/settlement.js';
import { retryUnavailable } from './support/retry-unavailable.js';

const WORKERS = {
  SHARDSTOCK_WORKERS: 'relay,settle,sweep',
  SHARDSTOCK_SWEEP_INTERVAL_MS: '500',
  SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '3000',
  SHARDSTOCK_SETTLE_MAX_DELIVER: '3',
};

let a: TestApp;
let b: TestApp;
let nc: NatsConnection;
beforeAll(async () => {
  a = await startTestApp({ ...WORKERS, SHARDSTOCK_INSTANCE_ID: 'settle-a' });
  // A second instance on the same keys and stream: both relay and settle, sharing the work.
  b = await startTestApp({ ...WORKERS, SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_INSTANCE_ID: 'settle-b' });
  nc = await connect({ servers: 'nats://127.0.0.1:4222' });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
  if (nc) {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(settlementNames(a.namespace).stream).catch(() => {});
    await nc.close();
  }
});

describe('settlement of a concurrent run', () => {
  it('when Deducts and Compensates race on two instances, then once settled the ledger has exactly one row per success, remaining = total - deducted + compensated, and Reconcile is consistent', async () => {
    const id = uniqueId();
    const total = 1500;
    await a.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 8 });
    let deductions = 0;
    let deductedUnits = 0;
    let compensations = 0;
    let compensatedUnits = 0;
    let next = 0;
    const N = 1600;
    // Enough demand to sell out (with fallback moves between shards), and a third of the successes given back.
    const worker = async () => {
      while (next < N) {
        const i = next++;
        const client = i % 2 ? a.client : b.client;
        const q = 1 + (i % 3);
        // ABORTED (contention while units move between shards near the sell-out) and UNAVAILABLE are retried
        // with the same request id, as the typed client does: the retry replays or deducts once.
        const r = await retryUnavailable(() => client.deduct({ couponId: id, requestId: `r-${i}`, quantity: BigInt(q) }));
        if (r.outcome !== DeductOutcome.DEDUCTED) continue;
        deductions++;
        deductedUnits += q;
        if (i % 3 === 0) {
          const c = await retryUnavailable(() =>
            (i % 4 ? b : a).client.compensate({ couponId: id, requestId: `r-${i}`, reason: 'order cancelled' }),
          );
          expect(c.outcome).toBe(CompensateOutcome.COMPENSATED);
          compensations++;
          compensatedUnits += q;
        }
      }
    };
    await Promise.all(Array.from({ length: 64 }, worker));
    expect(deductedUnits - compensatedUnits).toBeLessThanOrEqual(total);
    expect(deductions).toBeGreaterThan(500);

    const rec = await settled(a.client, id);
    const f = await ledgerFigures(a.app, id);
    if (process.env.TEST_TRACE)
      console.log(JSON.stringify({ a: a.app.settlement.stats.settle, b: b.app.settlement.stats.settle, anomalies: f.anomalies }));
    expect(f.duplicates).toBe(0);
    expect(f.anomalies).toEqual([]);
    expect(f.deductRows).toBe(deductions);
    expect(f.deductUnits).toBe(deductedUnits);
    expect(f.compensateRows).toBe(compensations);
    expect(f.compensateUnits).toBe(compensatedUnits);
    expect(f.remaining).toBe(total - deductedUnits + compensatedUnits);
    expect(rec).toMatchObject({
      consistent: true,
      ledgerDrift: 0n,
      redisDrift: 0n,
      anomalies: 0n,
      ledgerDeducted: BigInt(deductedUnits),
      ledgerCompensated: BigInt(compensatedUnits),
      settledRemaining: BigInt(f.remaining),
      redisAvailable: BigInt(f.remaining),
      redisNetDeducted: BigInt(deductedUnits - compensatedUnits),
    });
    // GetStock may reuse the coupon's MySQL row for LEVEL_RECORD_TTL_MS (src/domain/admin.ts): b's copy can
    // predate the last settled compensation by that much, never more.
    await expect
      .poll(async () => (await b.client.getStock({ couponId: id })).level!, { timeout: 5 * LEVEL_RECORD_TTL_MS, interval: 25 })
      .toMatchObject({ settledRemaining: BigInt(f.remaining), pendingSettlement: 0n });
    // Two relays, one outbox per shard: every event published once, none twice.
    const published = a.app.settlement.stats.relay.published + b.app.settlement.stats.relay.published;
    expect(published).toBe(deductions + compensations);
  });

  it('when events are still in flight, then GetStock reports them as pending settlement and Reconcile counts them', async () => {
    const id = uniqueId();
    // An instance that relays but does not settle: the events wait in JetStream.
    const r = await startTestApp({
      SHARDSTOCK_WORKERS: 'relay',
      SHARDSTOCK_INSTANCE_ID: 'relay-only',
      SHARDSTOCK_NAMESPACE: uniqueId('n'),
    });
    try {
      await r.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 2 });
      for (let i = 0; i < 5; i++) await r.client.deduct({ couponId: id, requestId: `p-${i}`, quantity: 2n });
      const rec = await waitFor(
        'the relay',
        () => r.client.reconcile({ couponId: id }),
        (x) => x.outboxEvents === 0n && x.jetstreamPending === 5n,
      );
      expect(rec).toMatchObject({
        consistent: true,
        inFlightNet: 10n,
        settledRemaining: 50n,
        redisAvailable: 40n,
        redisDrift: 0n,
        ledgerDeducted: 0n,
      });
      const level = (await r.client.getStock({ couponId: id })).level!;
      expect(level.settledRemaining).toBe(50n);
      expect(level.pendingSettlement).toBe(10n);
    } finally {
      const jsm = await nc.jetstreamManager();
      await jsm.streams.delete(settlementNames(r.namespace).stream).catch(() => {});
      await r.close();
    }
  });
});

describe('duplicates', () => {
  it('when the same event is published twice and delivered twice, then it is applied once', async () => {
    // Relay only: the test plays the settler, so it can lose an ack on purpose.
    const r = await startTestApp({ SHARDSTOCK_WORKERS: 'relay', SHARDSTOCK_INSTANCE_ID: 'dup', SHARDSTOCK_NAMESPACE: uniqueId('n') });
    const names = settlementNames(r.namespace);
    try {
      const id = uniqueId();
      await r.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2 });
      const d = await r.client.deduct({ couponId: id, requestId: 'dup-1', quantity: 3n });
      expect(d.outcome).toBe(DeductOutcome.DEDUCTED);
      await waitFor(
        'the relay',
        () => r.app.settlement.stream.pending(id),
        (n) => n === 1,
      );

      // Published again with its id: JetStream recognises it.
      const js = nc.jetstream();
      const event: SettlementEvent = {
        kind: 'D',
        couponId: id,
        requestId: 'dup-1',
        userId: '',
        quantity: 3,
        shard: d.shard,
        occurredAt: Date.now(),
        reason: '',
      };
      const again = await js.publish(names.subject(id), encodeEvent(event), { msgID: eventId(event) });
      expect(again.duplicate).toBe(true);
      // Published again after the duplicate window (simulated with another id): JetStream stores it twice.
      const late = await js.publish(names.subject(id), encodeEvent(event), { msgID: `late-${eventId(event)}` });
      expect(late.duplicate).toBe(false);
      expect(await r.app.settlement.stream.pending(id)).toBe(2);

      const stats = newSettlementStats().settle;
      const settler = new Settler(
        {
          consumer: () => js.consumers.get(names.stream, names.durable),
          ledger: r.app.settlement.ledger,
          refusals: new RedisRefusalStore(r.app.redis, r.namespace, r.app.config.idempotencyWindowS),
          compensationsInFlight: (c) => r.app.settlement.inFlight.compensationsInFlight(c),
          stats,
        },
        { batch: 10, maxDeliver: 3 },
      );
      const consumer = await js.consumers.get(names.stream, names.durable);
      const fetch = async (n: number) => {
        const out: JsMsg[] = [];
        for await (const m of await consumer.fetch({ max_messages: n, expires: 2000 })) out.push(m);
        return out;
      };
      // First delivery: the first message is settled, but its ack is lost (the process "died" after commit).
      const first = await fetch(1);
      expect(first).toHaveLength(1);
      const lostAck = Object.create(first[0]!, { ack: { value: () => {} }, ackAck: { value: async () => true } }) as JsMsg;
      await settler.handle([lostAck]);
      expect(stats.applied).toBe(1);
      first[0]!.nak();
      // Second delivery of it, plus the late copy: both recognised as settled.
      const second = await fetch(2);
      expect(second.map((m) => m.info.deliveryCount).sort()).toEqual([1, 2]);
      await settler.handle(second);
      expect(stats).toMatchObject({ applied: 1, duplicates: 2 });
      await waitFor(
        'the stream to empty',
        () => r.app.settlement.stream.pending(id),
        (n) => n === 0,
      );

      const f = await ledgerFigures(r.app, id);
      expect(f).toMatchObject({ deductRows: 1, deductUnits: 3, remaining: 17, duplicates: 0, anomalies: [] });
      expect(await r.client.reconcile({ couponId: id })).toMatchObject({
        consistent: true,
        inFlightNet: 0n,
        settledRemaining: 17n,
        redisAvailable: 17n,
      });
    } finally {
      const jsm = await nc.jetstreamManager();
      await jsm.streams.delete(names.stream).catch(() => {});
      await r.close();
    }
  });
});

describe('anomalies', () => {
  it('when MySQL cannot cover settled deductions, then they are oversold anomalies: never back on sale, Redis repaired down to the bound, Compensate still answers', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    // MySQL believes only 2 units are left (written behind the service's back): Redis holds 8 too many.
    await a.app.orm.em.fork().execute('update coupon set settled_remaining = 2 where id = ?', [id]);
    const rids = ['x-1', 'x-2', 'x-3', 'x-4', 'x-5'];
    for (const rid of rids)
      expect((await a.client.deduct({ couponId: id, requestId: rid, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);

    const f = await waitFor(
      'three anomalies',
      () => ledgerFigures(a.app, id),
      (x) => x.anomalies.length === 3,
    );
    expect(f.deductRows).toBe(2);
    expect(f.remaining).toBe(0);
    expect(f.anomalies.map((n) => [n.reason, n.quantity, n.refunded])).toEqual(
      new Array(3).fill(['insufficient_settled_remaining', 1, false]),
    );
    // Counted once each (the rows commit just before the settler marks the refusal in Redis and counts it).
    await waitFor(
      'the refusals to be counted',
      async () => a.app.settlement.stats.settle.oversoldUnits + b.app.settlement.stats.settle.oversoldUnits,
      (n) => n === 3,
    );
    // The refusals asked for a repair: the 5 units Redis still held beyond MySQL's 0 are taken away, nothing
    // was put back on sale, and the REPAIR row says so.
    const s = await waitFor(
      'the repair',
      () => shardState(a.app, id),
      (x) => x.available === 0,
    );
    expect(s.net).toBe(5);
    const repairs = await a.app.orm.em
      .fork()
      .execute<{ quantity: number; reason: string }[]>(
        `select quantity, reason from stock_ledger where coupon_id = ? and kind = 'REPAIR'`,
        [id],
      );
    expect(repairs.reduce((sum, r) => sum + Number(r.quantity), 0)).toBe(-5);
    expect(repairs[0]!.reason).toContain('lowered a surplus of 5');
    // Sold out now: a new buyer cannot take a unit MySQL does not have.
    expect((await a.client.deduct({ couponId: id, requestId: 'x-6', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
    const rec = await drainedReconcile(a.client, id);
    expect(rec).toMatchObject({
      anomalies: 3n,
      anomalyUnits: 3n,
      ledgerDeducted: 2n,
      settledRemaining: 0n,
      redisAvailable: 0n,
      inFlightNet: 0n,
      ledgerDrift: -8n,
      redisDrift: 0n,
    });
    // The caller of a refused deduction can still compensate it; its units do not go back on sale.
    const refusedRequest = f.anomalies[0]!.eventId.split(':').pop()!;
    expect((await a.client.compensate({ couponId: id, requestId: refusedRequest, reason: 'late cancel' })).outcome).toBe(
      CompensateOutcome.COMPENSATED,
    );
    expect((await shardState(a.app, id)).available).toBe(0);
    const after = await drainedReconcile(a.client, id);
    expect(after).toMatchObject({ redisAvailable: 0n, redisDrift: 0n, settledRemaining: 0n });
  });

  it('when a message is unparsable or names an unknown coupon, then after bounded redeliveries it becomes an anomaly and does not block other events', async () => {
    const names = settlementNames(a.namespace);
    const js = nc.jetstream();
    const unknown = uniqueId('nope');
    const ghost: SettlementEvent = {
      kind: 'D',
      couponId: unknown,
      requestId: 'g-1',
      userId: '',
      quantity: 1,
      shard: 0,
      occurredAt: Date.now(),
      reason: '',
    };
    await js.publish(names.subject(unknown), encodeEvent(ghost), { msgID: eventId(ghost) });
    const garbageId = uniqueId('garbage');
    const h = headers();
    await js.publish(names.subject(garbageId), new TextEncoder().encode('{not json'), {
      msgID: garbageId,
      headers: h,
    });
    // Meanwhile a normal coupon keeps settling.
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 1 });
    await a.client.deduct({ couponId: id, requestId: 'ok-1', quantity: 2n });
    await settled(a.client, id, 20_000);
    expect((await ledgerFigures(a.app, id)).deductRows).toBe(1);

    const rows = await waitFor(
      'the poison anomalies',
      () =>
        a.app.orm.em
          .fork()
          .execute<{ event_id: string; reason: string }[]>('select event_id, reason from settlement_anomaly where event_id in (?, ?)', [
            eventId(ghost),
            garbageId,
          ]),
      (x) => x.length === 2,
      30_000,
    );
    expect(Object.fromEntries(rows.map((r) => [r.event_id, r.reason]))).toEqual({
      [eventId(ghost)]: 'unknown_coupon',
      [garbageId]: 'unparsable_message',
    });
    await waitFor(
      'the poison to leave the stream',
      () => a.app.settlement.stream.pending(unknown),
      (n) => n === 0,
    );
    expect(await a.app.settlement.stream.pending(garbageId)).toBe(0);
  });
});

describe('periodic reconciler', () => {
  it('when a coupon drifts, then the periodic reconciler reports it after consecutive runs, and a consistent coupon stays clean', async () => {
    const r = await startTestApp({
      SHARDSTOCK_WORKERS: 'reconcile',
      SHARDSTOCK_RECONCILE_INTERVAL_MS: '300',
      SHARDSTOCK_NAMESPACE: a.namespace,
      SHARDSTOCK_INSTANCE_ID: 'reconciler',
    });
    try {
      const [good, bad] = [uniqueId(), uniqueId()];
      for (const id of [good, bad]) {
        await r.client.createCoupon({ couponId: id, totalStock: 30n, shardCount: 2 });
        await r.client.deduct({ couponId: id, requestId: 'q-1', quantity: 2n });
      }
      await a.app.orm.em.fork().execute('update coupon set settled_remaining = settled_remaining - 3 where id = ?', [bad]);
      const stats = r.app.settlement.stats.reconcile;
      await waitFor(
        'the drift to persist',
        async () => stats.lastDrift.get(bad),
        (d) => (d?.consecutive ?? 0) >= 2,
        20_000,
        100,
      );
      await settled(r.client, good);
      await waitFor(
        'a clean run of the good coupon',
        async () => stats.lastDrift.get(good),
        (d) => d?.consecutive === 0 && d.checkedAt.getTime() > Date.now() - 1000,
        20_000,
        100,
      );
      // A run that overlaps the settling of bad's deduction sees Redis low for a moment (Reconcile's snapshot
      // errs only on that side): the drift that persists is read from a run after it settled.
      await waitFor(
        'a run of the bad coupon after its deduction settled',
        async () => stats.lastDrift.get(bad),
        (d) => d?.redisDrift === 3 && d.checkedAt.getTime() > Date.now() - 1000,
        20_000,
        100,
      );
      expect(stats.lastDrift.get(bad)).toMatchObject({ ledgerDrift: -3, redisDrift: 3 });
      expect(stats.persistentDrift).toBeGreaterThanOrEqual(1);
      expect(r.app.settlement.figures()).toMatchObject({ reconcileInconsistent: 1, reconcileDriftUnits: 6 });
    } finally {
      await r.close();
    }
  });
});

describe('in-flight count', () => {
  it('when a shard is lost while its events are unsettled, then the reload subtracts exactly what is still in flight', async () => {
    const r = await startTestApp({ SHARDSTOCK_WORKERS: 'relay', SHARDSTOCK_INSTANCE_ID: 'inflight', SHARDSTOCK_NAMESPACE: uniqueId('n') });
    try {
      const id = uniqueId();
      await r.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 2 });
      const coupon = (await r.app.repo.find(id))!;
      for (let i = 0; i < 6; i++) await r.client.deduct({ couponId: id, requestId: `f-${i}`, quantity: 1n });
      await r.client.compensate({ couponId: id, requestId: 'f-0', reason: 'x' });
      // Some events relayed to JetStream, none settled (no settler): 6 deductions - 1 compensation in flight.
      await waitFor(
        'the relay',
        () => r.app.settlement.inFlight.measure(id),
        (m) => m.outboxEvents === 0 && m.jetstreamPending === 7,
      );
      expect(await r.app.settlement.inFlight.inFlightNet(id)).toBe(5);
      const before = await shardState(r.app, id);
      const lostAvail = before.levels[0]!.available!;
      await r.app.redis.del(r.app.store.keys(shardRef(coupon, 0)).shard);
      // A Deduct homed on the lost shard reloads it: MySQL remaining (40) - in flight (5) - the other shard.
      const rid = Array.from({ length: 100 }, (_, i) => `probe-${i}`).find((x) => homeShard(coupon, x, '') === 0)!;
      expect((await r.client.deduct({ couponId: id, requestId: rid, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
      const after = await shardState(r.app, id);
      expect(after.levels[0]!.available).toBe(lostAvail - 1);
      expect(after.available + after.inTransit).toBe(before.available + before.inTransit - 1);
    } finally {
      const jsm = await nc.jetstreamManager();
      await jsm.streams.delete(settlementNames(r.namespace).stream).catch(() => {});
      await r.close();
    }
  });
});
