// The pipelined settler on the real stack (JetStream -> MySQL): two settling instances draining one stream of
// several coupons at once, every event also stored a second time under another message id (a republish after
// the duplicate window), compensations before and after their deductions; and a commit whose ack never
// arrives, replayed through the pipeline. Counted exactly against what was published.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Consumer, type ConsumerMessages, type JsMsg, type NatsConnection } from 'nats';
import { ensureSettlementStream, settlementNames } from '../src/settlement/jetstream.js';
import { decodeEvent, encodeEvent, eventId, type SettlementEvent } from '../src/settlement/event.js';
import { Settler } from '../src/settlement/settle/settler.js';
import { RedisRefusalStore } from '../src/settlement/settle/refusal-store.js';
import { newSettlementStats } from '../src/settlement/stats.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, waitFor } from './support/settlement.js';

const SETTLER = {
  SHARDSTOCK_WORKERS: 'settle',
  // Small batches, and two transactions of one coupon at once per instance (four over both): many
  // transactions, overlapping on the same coupon rows within and across instances.
  SHARDSTOCK_SETTLE_BATCH: '150',
  SHARDSTOCK_SETTLE_CONCURRENCY: '3',
  SHARDSTOCK_SETTLE_PER_COUPON: '2',
};

let observer: TestApp;
let nc: NatsConnection;
const namespace = uniqueId('n');
const names = settlementNames(namespace);

beforeAll(async () => {
  observer = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'observer' });
  nc = await connect({ servers: 'nats://127.0.0.1:4222' });
  await ensureSettlementStream(nc, names, { maxAckPending: 20_000 });
});
afterAll(async () => {
  await observer?.close();
  if (nc) {
    await (await nc.jetstreamManager()).streams.delete(names.stream).catch(() => {});
    await nc.close();
  }
});

interface Expected {
  deductions: number;
  deductedUnits: number;
  compensations: number;
  compensatedUnits: number;
}

/** Events of one coupon: deductions of 1-3 units, every fourth one compensated; a compensation is published
 * right before its deduction for one in five of them (relay order is not Redis order). */
function couponEvents(couponId: string, n: number): { events: SettlementEvent[]; expected: Expected } {
  const events: SettlementEvent[] = [];
  const expected: Expected = { deductions: 0, deductedUnits: 0, compensations: 0, compensatedUnits: 0 };
  const now = Date.now();
  for (let i = 0; i < n; i++) {
    const base = { couponId, requestId: `q-${i}`, userId: `u-${i % 97}`, quantity: 1 + (i % 3), shard: i % 4, occurredAt: now };
    const d: SettlementEvent = { ...base, kind: 'D', reason: '' };
    expected.deductions++;
    expected.deductedUnits += d.quantity;
    if (i % 4 === 0) {
      const c: SettlementEvent = { ...base, kind: 'C', reason: 'cancelled' };
      expected.compensations++;
      expected.compensatedUnits += c.quantity;
      if (i % 20 === 0) events.push(c, d);
      else events.push(d, c);
    } else {
      events.push(d);
    }
  }
  return { events, expected };
}

async function publishAll(events: SettlementEvent[], idPrefix = ''): Promise<void> {
  const js = nc.jetstream();
  for (let i = 0; i < events.length; i += 500) {
    await Promise.all(
      events.slice(i, i + 500).map((e) => js.publish(names.subject(e.couponId), encodeEvent(e), { msgID: `${idPrefix}${eventId(e)}` })),
    );
  }
}

async function couponRow(couponId: string): Promise<{ version: number; remaining: number }> {
  const [r] = await observer.app.orm.em
    .fork()
    .execute<{ version: number | string; settled_remaining: number | string }[]>(
      'select version, settled_remaining from coupon where id = ?',
      [couponId],
    );
  return { version: Number(r!.version), remaining: Number(r!.settled_remaining) };
}

describe('pipelined settlement', () => {
  it('when two instances settle several coupons at once, every event twice in the stream, then each lands exactly once: ledger rows == events, remaining == total - net, one version step per transaction', async () => {
    const TOTAL = 100_000;
    const PER_COUPON = 1200;
    const coupons = Array.from({ length: 4 }, () => uniqueId());
    for (const id of coupons) await observer.client.createCoupon({ couponId: id, totalStock: BigInt(TOTAL), shardCount: 4 });
    const before = new Map<string, number>();
    for (const id of coupons) before.set(id, (await couponRow(id)).version);

    const b = await startTestApp({ ...SETTLER, SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'settle-b' });
    const c = await startTestApp({ ...SETTLER, SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'settle-c' });
    try {
      const all = coupons.map((id) => ({ id, ...couponEvents(id, PER_COUPON) }));
      // Interleaved across coupons, as the relay of many shards would store them.
      const stream: SettlementEvent[] = [];
      for (let i = 0; ; i++) {
        const step = all.map((x) => x.events[i]).filter((e): e is SettlementEvent => e !== undefined);
        if (step.length === 0) break;
        stream.push(...step);
      }
      // Every event again under another message id: JetStream stores both, only the ledger can tell.
      await Promise.all([publishAll(stream), publishAll(stream, 'late-')]);
      const published = stream.length * 2;

      await waitFor(
        'the stream to drain',
        () => observer.app.settlement.stream.total(),
        (t) => t.messages === 0,
        120_000,
        500,
      );
      const sb = b.app.settlement.stats.settle;
      const sc = c.app.settlement.stats.settle;
      // Both instances did part of the work.
      expect(sb.applied).toBeGreaterThan(0);
      expect(sc.applied).toBeGreaterThan(0);
      expect(sb.applied + sc.applied).toBe(stream.length);
      // Every message was acked once settled: applied, or recognised as settled (the copies, any redelivery).
      expect(sb.applied + sc.applied + sb.duplicates + sc.duplicates).toBeGreaterThanOrEqual(published);
      expect(sb.anomalies + sc.anomalies).toBe(0);

      const transactions = sb.batches + sc.batches;
      for (const { id, expected } of all) {
        const f = await ledgerFigures(observer.app, id);
        expect(f).toMatchObject({
          deductRows: expected.deductions,
          deductUnits: expected.deductedUnits,
          compensateRows: expected.compensations,
          compensateUnits: expected.compensatedUnits,
          duplicates: 0,
          anomalies: [],
          remaining: TOTAL - expected.deductedUnits + expected.compensatedUnits,
        });
        // Each transaction that wrote rows stamped them with one settled_at and bumped the version once: the
        // version moved at least once per distinct stamp, and never more often than there were transactions.
        const row = await couponRow(id);
        const steps = row.version - before.get(id)!;
        const [stamps] = await observer.app.orm.em
          .fork()
          .execute<{ n: number | string }[]>('select count(distinct settled_at) n from stock_ledger where coupon_id = ?', [id]);
        expect(steps).toBeGreaterThanOrEqual(Number(stamps!.n));
        expect(steps).toBeLessThanOrEqual(transactions);
        expect(row.remaining).toBe(f.remaining);
      }
    } finally {
      await Promise.all([b.close(), c.close()]);
    }
  });

  it('when a coupon settles down to exactly zero with its transactions overlapping on two instances, then deductions the remaining cannot cover yet wait for their compensations: remaining 0, no anomaly, every row once', async () => {
    const id = uniqueId();
    const { events, expected } = couponEvents(id, 1200);
    // Exactly the net: near the end a deduction published before its compensation does not fit until the
    // compensation settles, and transactions that inserted before taking the row lock must decide again.
    const total = expected.deductedUnits - expected.compensatedUnits;
    await observer.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 4 });
    const b = await startTestApp({ ...SETTLER, SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'zero-b' });
    const c = await startTestApp({ ...SETTLER, SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'zero-c' });
    try {
      await Promise.all([publishAll(events), publishAll(events, 'late-')]);
      await waitFor(
        'the coupon to settle',
        () => observer.app.settlement.stream.pending(id),
        (n) => n === 0,
        120_000,
        500,
      );
      const f = await ledgerFigures(observer.app, id);
      expect(f).toMatchObject({
        deductRows: expected.deductions,
        deductUnits: expected.deductedUnits,
        compensateRows: expected.compensations,
        compensateUnits: expected.compensatedUnits,
        duplicates: 0,
        anomalies: [],
        remaining: 0,
      });
      const sb = b.app.settlement.stats.settle;
      const sc = c.app.settlement.stats.settle;
      expect(sb.applied + sc.applied).toBe(events.length);
      expect(sb.refused + sc.refused).toBe(0);
      if (process.env.TEST_TRACE) console.log(JSON.stringify({ b: sb, c: sc }));
    } finally {
      await Promise.all([b.close(), c.close()]);
    }
  });

  it('when a commit is never acked (the settler died after COMMIT), then the redelivery through the pipeline inserts nothing and moves nothing', async () => {
    const id = uniqueId();
    await observer.client.createCoupon({ couponId: id, totalStock: 5000n, shardCount: 2 });
    const { events, expected } = couponEvents(id, 400);
    await publishAll(events);

    const js = nc.jetstream();
    const stats = newSettlementStats().settle;
    // The first ack of every event is lost (after its commit): nak'ed instead, so the message comes straight
    // back as a redelivery after a crash would (without waiting out the ack wait). Later acks go through.
    const lostAck = new Set<string>();
    const lossy = (m: JsMsg): JsMsg => {
      const e = decodeEvent(m.data)!;
      const lose = () => {
        if (lostAck.has(eventId(e))) return false;
        lostAck.add(eventId(e));
        m.nak();
        return true;
      };
      return Object.create(m, {
        ack: { value: () => void (lose() || m.ack()) },
        ackAck: { value: async () => lose() || m.ackAck() },
      }) as JsMsg;
    };
    const consumer = async (): Promise<Consumer> => {
      const real = await js.consumers.get(names.stream, names.durable);
      return Object.create(real, {
        consume: {
          value: async (opts: Parameters<Consumer['consume']>[0]) => {
            const inner = await real.consume(opts);
            return {
              stop: (err?: Error) => inner.stop(err),
              closed: () => inner.closed(),
              async *[Symbol.asyncIterator]() {
                for await (const m of inner) yield lossy(m);
              },
            } as unknown as ConsumerMessages;
          },
        },
      }) as Consumer;
    };
    const settler = new Settler(
      {
        consumer,
        ledger: observer.app.settlement.ledger,
        refusals: new RedisRefusalStore(observer.app.redis, namespace, observer.app.config.idempotencyWindowS),
        compensationsInFlight: async () => new Map(),
        stats,
      },
      { batch: 100, maxDeliver: 5, concurrency: 2 },
    ).start();
    try {
      await waitFor(
        'the coupon to settle',
        () => observer.app.settlement.stream.pending(id),
        (n) => n === 0,
        60_000,
        250,
      );
    } finally {
      await settler.stop();
    }
    // Every event was committed once and its first ack lost; each came back and was recognised as settled.
    expect(stats.applied).toBe(events.length);
    expect(lostAck.size).toBe(events.length);
    expect(stats.duplicates).toBeGreaterThanOrEqual(events.length);
    const f = await ledgerFigures(observer.app, id);
    expect(f).toMatchObject({
      deductRows: expected.deductions,
      deductUnits: expected.deductedUnits,
      compensateRows: expected.compensations,
      compensateUnits: expected.compensatedUnits,
      duplicates: 0,
      anomalies: [],
      remaining: 5000 - expected.deductedUnits + expected.compensatedUnits,
    });
  });
});
