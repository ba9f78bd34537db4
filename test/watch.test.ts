// WatchStock across two instances on one stack (same namespace): levels travel over NATS, one subscription
// per coupon per instance, coalesced per stream, final levels kept, NOT_FOUND for unknown coupons.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { connect as connectNats, StringCodec } from 'nats';
import { InventoryService, type StockLevel } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

const namespace = `w${Date.now().toString(36)}`;
const lowId = uniqueId('low');
let a: TestApp; // serves the deductions
let b: TestApp; // serves the watchers

beforeAll(async () => {
  const env = { SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_LOW_STOCK_THRESHOLDS: `${lowId}=5` };
  [a, b] = await Promise.all([
    startTestApp({ ...env, SHARDSTOCK_INSTANCE_ID: 'watch-a' }),
    startTestApp({ ...env, SHARDSTOCK_INSTANCE_ID: 'watch-b' }),
  ]);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

const connectClient = (t: TestApp) => createClient(InventoryService, createConnectTransport({ baseUrl: t.httpUrl, httpVersion: '1.1' }));

/** Reads a stream until `until` holds (or it ends): `first` resolves with the first level, `all` with every
 * level seen and when. */
function collect(stream: AsyncIterable<{ level?: StockLevel | undefined }>, until: (l: StockLevel) => boolean) {
  let gotFirst!: (l: StockLevel) => void;
  const first = new Promise<StockLevel>((r) => (gotFirst = r));
  const all = (async () => {
    const seen: { level: StockLevel; at: number }[] = [];
    for await (const msg of stream) {
      if (seen.length === 0) gotFirst(msg.level!);
      seen.push({ level: msg.level!, at: Date.now() });
      if (until(msg.level!)) break;
    }
    return seen;
  })();
  return { first, all };
}

async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The level instance `t` last read for a watched coupon. */
const feedLevel = (t: TestApp, couponId: string) => t.app.watch.busiest(1000).find((f) => f.couponId === couponId)?.level;

function expectFallingToSoldOut(seen: { level: StockLevel }[], total: number) {
  const levels = seen.map((s) => s.level);
  expect(levels[0]!.available).toBe(BigInt(total));
  for (let i = 1; i < levels.length; i++) {
    expect(levels[i]!.available).toBeLessThanOrEqual(levels[i - 1]!.available);
    expect(levels[i]!.deducted).toBeGreaterThanOrEqual(levels[i - 1]!.deducted);
    expect(levels[i]!.available + levels[i]!.deducted).toBe(BigInt(total));
  }
  const last = levels.at(-1)!;
  expect(last.available).toBe(0n);
  expect(last.deducted).toBe(BigInt(total));
  expect(last.soldOut).toBe(true);
  expect(last.shards.every((s) => s.available === 0n && s.inTransit === 0n)).toBe(true);
}

describe('WatchStock across instances', () => {
  it('when watchers on instance B (gRPC and Connect) follow a coupon whose every deduction instance A serves, then they see the current level first and end at 0 and sold_out', async () => {
    const id = uniqueId('w');
    const total = 300;
    await a.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 4 });
    const ac = new AbortController();
    const grpcSeen = collect(b.client.watchStock({ couponId: id }, { signal: ac.signal }), (l) => l.soldOut);
    const connectSeen = collect(connectClient(b).watchStock({ couponId: id }, { signal: ac.signal }), (l) => l.soldOut);
    await Promise.all([grpcSeen.first, connectSeen.first]);
    const deductsBefore = b.app.deduct.stats;

    // 8 callers on A take the whole stock one unit at a time.
    const announcedBefore = a.app.changes.announced;
    const loadStarted = Date.now();
    let next = 0;
    const outcomes: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < total + 5) {
          const r = await a.client.deduct({ couponId: id, requestId: `r${next++}`, quantity: 1n });
          outcomes.push(r.outcome);
        }
      }),
    );
    expect(outcomes.filter((o) => o === 1).length).toBe(total);
    // A told the other instances with at most one ping per announce interval (50 ms), not one per deduction.
    await new Promise((r) => setTimeout(r, 100));
    const pings = a.app.changes.announced - announcedBefore;
    expect(pings).toBeGreaterThan(0);
    expect(pings).toBeLessThanOrEqual(Math.ceil((Date.now() - loadStarted) / 50) + 1);
    expect(pings).toBeLessThan(total / 2);

    const [g, c] = await Promise.all([grpcSeen.all, connectSeen.all]);
    ac.abort();
    expectFallingToSoldOut(g, total);
    expectFallingToSoldOut(c, total);
    // Coalesced: far fewer messages than deductions, and B served none of them.
    expect(g.length).toBeLessThan(total / 2);
    expect(b.app.deduct.stats).toEqual(deductsBefore);
    expect(b.app.changes.announced).toBe(0);
    await waitUntil('B to free the streams', () => b.app.watch.stats().streams === 0 && b.app.levels.subscriptions === 0);
  });

  it('when a stream asks for min_interval_ms 400 while deductions run continuously, then it gets at most one message per 400 ms and still the sold-out level', async () => {
    const id = uniqueId('w');
    const total = 120;
    await a.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 2 });
    const started = Date.now();
    const seen = collect(b.client.watchStock({ couponId: id, minIntervalMs: 400 }), (l) => l.soldOut);
    await seen.first;
    for (let i = 0; i < total; i++) {
      await a.client.deduct({ couponId: id, requestId: `p${i}`, quantity: 1n });
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 15));
    }
    const s = await seen.all;
    expectFallingToSoldOut(s, total);
    const elapsed = Date.now() - started;
    // Pacing is enforced server side, so a slow machine can only mean fewer messages.
    expect(s.length).toBeLessThanOrEqual(Math.floor(elapsed / 400) + 2);
    for (let i = 1; i < s.length; i++) expect(s[i]!.at - s[i - 1]!.at).toBeGreaterThanOrEqual(300);
  });

  it('when min_interval_ms is below the floor or 0, then the floor applies; a larger one is kept up to 60 s', () => {
    const floor = b.app.config.watchMinIntervalMs;
    expect(b.app.watch.intervalFor(0)).toBe(floor);
    expect(b.app.watch.intervalFor(1)).toBe(floor);
    expect(b.app.watch.intervalFor(-5)).toBe(floor);
    expect(b.app.watch.intervalFor(floor + 250)).toBe(floor + 250);
    expect(b.app.watch.intervalFor(3_600_000)).toBe(60_000);
  });

  it('when units come back after a sell-out (Compensate, Restock), then watchers see the sold-out level and then the new level', async () => {
    const id = uniqueId('w');
    await a.client.createCoupon({ couponId: id, totalStock: 3n, shardCount: 1 });
    const ac = new AbortController();
    const levels: StockLevel[] = [];
    const done = (async () => {
      for await (const m of b.client.watchStock({ couponId: id }, { signal: ac.signal })) {
        levels.push(m.level!);
        if (m.level!.totalStock === 8n && m.level!.available === 6n) break;
      }
    })().catch(() => {});
    await waitUntil('stream open', () => levels.length === 1);
    for (let i = 0; i < 3; i++) await a.client.deduct({ couponId: id, requestId: `x${i}`, quantity: 1n });
    // B has read the sold-out level, and the stream may not send it before its interval has passed...
    await waitUntil('B to read the sold-out level', () => feedLevel(b, id)?.available === 0);
    // ...while units come back: a coalescer keeping only the latest level would swallow the 0.
    await a.client.compensate({ couponId: id, requestId: 'x0', reason: 'test' });
    await a.client.restock({ couponId: id, quantity: 5n, requestId: 'rs' });
    await done;
    ac.abort();
    const avail = levels.map((l) => Number(l.available));
    expect(avail[0]).toBe(3);
    expect(avail.at(-1)).toBe(6);
    expect(levels.filter((l) => l.soldOut)).toHaveLength(1);
    expect(levels.findIndex((l) => l.soldOut)).toBeLessThan(levels.length - 1);
    await waitUntil('B to free the stream', () => b.app.watch.stats().streams === 0);
  });

  it('when the coupon does not exist or its id is invalid, then NOT_FOUND / INVALID_ARGUMENT on both transports, and nothing stays allocated', async () => {
    const grpcCode = async (couponId: string) => {
      try {
        for await (const _ of b.client.watchStock({ couponId })) return 'OK';
        return 'ended';
      } catch (e) {
        return (e as ServiceError).code;
      }
    };
    const connectCode = async (couponId: string) => {
      try {
        for await (const _ of connectClient(b).watchStock({ couponId })) return 'OK';
        return 'ended';
      } catch (e) {
        return ConnectError.from(e).code;
      }
    };
    expect(await grpcCode(uniqueId('nope'))).toBe(status.NOT_FOUND);
    expect(await connectCode(uniqueId('nope'))).toBe(Code.NotFound);
    expect(await grpcCode('bad id!')).toBe(status.INVALID_ARGUMENT);
    expect(await connectCode('')).toBe(Code.InvalidArgument);
    expect(b.app.watch.stats()).toEqual({ feeds: 0, streams: 0, timers: 0, pendingLevels: 0 });
    expect(b.app.levels.subscriptions).toBe(0);
  });

  it('when a reader stops reading while the level keeps changing, then the server holds at most two levels for it and hands it the latest when it reads again', async () => {
    const id = uniqueId('w');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 2 });
    const ac = new AbortController();
    // The service's own iterator: nothing pulls between next() calls, as with a stalled socket.
    const it = b.app.watch.watch(id, 0, ac.signal)[Symbol.asyncIterator]();
    expect((await it.next()).value?.available).toBe(100);
    for (let i = 0; i < 40; i++) await a.client.deduct({ couponId: id, requestId: `s${i}`, quantity: 1n });
    await waitUntil('the feed to read the last level', () => feedLevel(b, id)?.available === 60);
    expect(b.app.watch.stats().pendingLevels).toBeLessThanOrEqual(2);
    const next = await it.next();
    expect(next.value?.available).toBe(60);
    ac.abort();
    expect((await it.next()).done).toBe(true);
    expect(b.app.watch.stats().streams).toBe(0);
  });

  it('when a coupon changes, then the ping on its level subject carries no body: the subject says which coupon, receivers need nothing else', async () => {
    const id = uniqueId('ping');
    await a.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 2 });
    const nc = await connectNats({ servers: a.app.config.natsUrl });
    const sizes: number[] = [];
    const sub = nc.subscribe(a.app.levels.levelSubject(id), { callback: (_e, m) => sizes.push(m.data.length) });
    await nc.flush();
    try {
      const announcedBefore = a.app.changes.announced;
      await Promise.all(Array.from({ length: 10 }, (_, i) => a.client.deduct({ couponId: id, requestId: `p${i}`, quantity: 1n })));
      await waitUntil('a ping', () => sizes.length >= 1);
      await new Promise((r) => setTimeout(r, 150));
      expect(sizes.length).toBeGreaterThanOrEqual(1);
      expect(sizes.length).toBeLessThanOrEqual(a.app.changes.announced - announcedBefore);
      expect(sizes.every((n) => n === 0)).toBe(true);
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });
});

describe('low-stock events', () => {
  it('when a coupon falls to its threshold from two instances at once, then one event is published; after stock comes back above it, the next fall publishes one more', async () => {
    const nc = await connectNats({ servers: a.app.config.natsUrl });
    const sc = StringCodec();
    const events: { couponId: string; available: number; threshold: number }[] = [];
    const sub = nc.subscribe(a.app.levels.lowStockSubject(lowId), { callback: (_e, m) => events.push(JSON.parse(sc.decode(m.data))) });
    await nc.flush();
    try {
      await a.client.createCoupon({ couponId: lowId, totalStock: 20n, shardCount: 2 });
      let n = 0;
      const take = (t: TestApp, count: number) =>
        Promise.all(Array.from({ length: count }, () => t.client.deduct({ couponId: lowId, requestId: `l${n++}`, quantity: 1n })));
      await Promise.all([take(a, 9), take(b, 9)]); // 2 left: crossed 5 once
      await waitUntil('the low-stock event', () => events.length >= 1);
      await new Promise((r) => setTimeout(r, 400));
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ couponId: lowId, threshold: 5 });
      expect(events[0]!.available).toBeLessThanOrEqual(5);

      await a.client.restock({ couponId: lowId, quantity: 10n, requestId: 'low-rs' }); // 12 > 5: re-armed
      await waitUntil('re-arm', async () => (await a.app.redis.exists(`${namespace}:lowstock:{${lowId}}`)) === 0);
      await Promise.all([take(a, 4), take(b, 4)]); // 4 left: crossed again
      await waitUntil('the second event', () => events.length >= 2);
      await new Promise((r) => setTimeout(r, 400));
      expect(events).toHaveLength(2);
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });
});
