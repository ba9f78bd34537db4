// The level checks on the real stack with many coupons changing: the shard probes they make stay within their
// per-interval budget (far fewer than the coupons announced), while a coupon that falls to its threshold in
// the middle of it still publishes its one low-stock event and its one sold-out event.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as connectNats, StringCodec } from 'nats';
import { MAX_PROBES_PER_TICK } from '../src/watch/level-checks.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ SHARDSTOCK_LOW_STOCK_THRESHOLD: '10%' });
});
afterAll(async () => {
  await t?.close();
});

async function waitUntil(what: string, cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('level checks on the stack', () => {
  it('when 200 coupons change in every interval for a while, then probes stay within the budget per interval, and a coupon falling to its threshold and selling out among them fires each event once', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => uniqueId(`m${i}`));
    const hot = uniqueId('hot');
    for (let i = 0; i < ids.length; i += 50)
      await Promise.all(ids.slice(i, i + 50).map((couponId) => t.client.createCoupon({ couponId, totalStock: 100n, shardCount: 2 })));
    await t.client.createCoupon({ couponId: hot, totalStock: 40n, shardCount: 4 });

    const nc = await connectNats({ servers: t.app.config.natsUrl });
    const sc = StringCodec();
    const events: string[] = [];
    const sub = nc.subscribe(`${t.namespace}.alerts.*.>`, {
      callback: (_e, m) => events.push(`${m.subject.split('.')[2]}:${(JSON.parse(sc.decode(m.data)) as { couponId: string }).couponId}`),
    });
    await nc.flush();
    try {
      const probes0 = t.app.levelChecks.probes;
      const announced0 = t.app.changes.announced;
      const started = performance.now();
      let n = 0;
      // 12 rounds: every coupon loses a unit per round, the hot one 4 (40 → 0: low at 4, then sold out).
      for (let round = 0; round < 12; round++) {
        const calls = ids.map((couponId) => t.app.deduct.deduct({ couponId, requestId: `r${n++}`, userId: '', quantity: 1n }));
        for (let k = 0; k < 4; k++) calls.push(t.app.deduct.deduct({ couponId: hot, requestId: `h${n++}`, userId: '', quantity: 1n }));
        await Promise.all(calls);
        await new Promise((r) => setTimeout(r, 60)); // at least one announcement interval per round
      }
      await waitUntil('the low-stock and sold-out events', () => events.includes(`sold_out:${hot}`) && events.includes(`low_stock:${hot}`));
      const elapsedMs = performance.now() - started;
      const probes = t.app.levelChecks.probes - probes0;
      const announced = t.app.changes.announced - announced0;
      // A tick is at least one announcement interval (50 ms by default) apart.
      const ticks = Math.ceil(elapsedMs / 50) + 1;
      expect(probes).toBeLessThanOrEqual(MAX_PROBES_PER_TICK * ticks);
      // Before the budget, each announced coupon was probed (twice): here most announcements cost no probe.
      expect(announced).toBeGreaterThan(2000);
      expect(probes).toBeLessThan(announced / 2);
      await new Promise((r) => setTimeout(r, 300));
      expect(events.filter((e) => e.endsWith(`:${hot}`)).sort()).toEqual([`low_stock:${hot}`, `sold_out:${hot}`]);
      expect(events.filter((e) => !e.endsWith(`:${hot}`))).toEqual([]);
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });
});
