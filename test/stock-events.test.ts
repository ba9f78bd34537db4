// Sold-out and back-in-stock events across two instances on one stack: each crossing publishes exactly one
// event on its documented subject, however many instances see it and however the units come back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as connectNats, StringCodec } from 'nats';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

const namespace = `e${Date.now().toString(36)}`;
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'events-a' });
  b = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'events-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

async function waitUntil(what: string, cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('sold-out and back-in-stock events', () => {
  it('when two instances sell a coupon out, units come back (Compensate, Restock) and it sells out again, then each crossing publishes exactly one event', async () => {
    const id = uniqueId('ev');
    const nc = await connectNats({ servers: a.app.config.natsUrl });
    const sc = StringCodec();
    const events: { kind: string; couponId: string; available: number; totalStock: number }[] = [];
    // The subjects waitlist services subscribe to (docs/observability.md).
    const sub = nc.subscribe(`${namespace}.alerts.*.>`, {
      callback: (_e, m) => {
        if (m.subject.includes('.sold_out.') || m.subject.includes('.back_in_stock.')) events.push(JSON.parse(sc.decode(m.data)));
      },
    });
    await nc.flush();
    const settle = () => new Promise((r) => setTimeout(r, 500));
    try {
      await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 4 });
      let n = 0;
      const take = (t: TestApp, count: number) =>
        Promise.all(Array.from({ length: count }, () => t.client.deduct({ couponId: id, requestId: `d${n++}` })));
      const first = [...(await take(a, 8)), ...(await Promise.all([take(a, 6), take(b, 6)])).flat()];
      expect(first.filter((r) => r.outcome === DeductOutcome.DEDUCTED)).toHaveLength(10);
      await waitUntil('the sold-out event', () => events.length >= 1);
      await settle();
      expect(events.map((e) => e.kind)).toEqual(['sold_out']);
      expect(events[0]).toMatchObject({ couponId: id, available: 0, totalStock: 10 });

      // Two units come back on different instances: one back-in-stock event.
      await Promise.all([b.client.compensate({ couponId: id, requestId: 'd0' }), a.client.compensate({ couponId: id, requestId: 'd1' })]);
      await waitUntil('back in stock', () => events.length >= 2);
      await settle();
      expect(events.map((e) => e.kind)).toEqual(['sold_out', 'back_in_stock']);
      expect(events[1]!.available).toBeGreaterThan(0);

      // Sold out again from both instances, then a restock.
      const again = (await Promise.all([take(a, 3), take(b, 3)])).flat();
      expect(again.filter((r) => r.outcome === DeductOutcome.DEDUCTED)).toHaveLength(2);
      await waitUntil('the second sell-out', () => events.length >= 3);
      await b.client.restock({ couponId: id, quantity: 5n, requestId: 'ev-rs' });
      await waitUntil('the second return', () => events.length >= 4);
      await settle();
      expect(events.map((e) => e.kind)).toEqual(['sold_out', 'back_in_stock', 'sold_out', 'back_in_stock']);
      expect(events[3]).toMatchObject({ available: 5, totalStock: 15 });
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });
});
