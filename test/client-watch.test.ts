// The client's watchStock against a real instance: a stream the server ends normally (its lifetime ran out, the
// instance shuts down) is opened again, as the server's OK asks, and streams that end before their first level
// are opened a bounded number of times; a caller's deadline bounds the whole watch, reconnections included;
// close() ends open watches and retry waits. The service, Redis, NATS and MariaDB are real; the connection is
// cut by a TCP proxy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { createShardstockClient, ShardstockCallError, type RetryEvent } from 'shardstock/client';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { TcpProxy } from './support/tcp-proxy.js';

const C = grpc.status;

describe('watchStock over a stream the server ends', () => {
  let t: TestApp;
  beforeAll(async () => {
    // The shortest lifetime the config takes: every stream is ended OK after 1 s.
    t = await startTestApp({ SHARDSTOCK_MAX_STREAM_LIFETIME_MS: '1000' });
  });
  afterAll(async () => t?.close());

  it('when the server ends the stream OK (its lifetime), then watchStock opens it again and goes on with the current level', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 20n, shardCount: 2 });
    const client = createShardstockClient({ address: t.grpcAddr });
    const ac = new AbortController();
    try {
      const levels = client.watchStock({ couponId }, { signal: ac.signal })[Symbol.asyncIterator]();
      expect((await levels.next()).value?.level?.available).toBe(20n);
      // Past the first stream's lifetime: the level after it comes on the stream opened again.
      await new Promise((r) => setTimeout(r, 1500));
      await t.client.deduct({ couponId, requestId: 'lw-1', quantity: 3n });
      let next = await levels.next();
      for (let i = 0; i < 5 && !next.done && next.value.level?.available === 20n; i++) next = await levels.next();
      expect(next.done).toBe(false);
      expect(next.value?.level).toMatchObject({ available: 17n, deducted: 3n });
      await levels.return?.();
    } finally {
      ac.abort();
      client.close();
    }
  });
});

describe('watchStock against an instance that is shutting down', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.close());

  it('when every stream ends OK before its first level, then watchStock backs off, opens at most maxAttempts streams and ends', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 5n, shardCount: 1 });
    // What shutdown does first: every stream, open or new, ends OK at once.
    t.app.watch.close();
    let opened = 0;
    const counting: grpc.Interceptor = (options, nextCall) => {
      opened++;
      return new grpc.InterceptingCall(nextCall(options));
    };
    const client = createShardstockClient({
      address: t.grpcAddr,
      retry: { maxAttempts: 4, initialBackoffMs: 20 },
      channelOptions: { interceptors: [counting] },
    });
    const started = Date.now();
    try {
      let messages = 0;
      for await (const _ of client.watchStock({ couponId })) messages++;
      expect(messages).toBe(0);
      expect(opened).toBe(4);
      // Backed off between them (jittered within the upper half of 40, 80 and 160 ms), not a tight loop.
      expect(Date.now() - started).toBeGreaterThanOrEqual(130);
    } finally {
      client.close();
    }
  });
});

describe('watchStock with a deadline', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.close());

  it('when the connection breaks and the stream is opened again, then the watch still ends at the deadline the caller gave', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 20n, shardCount: 2 });
    const proxy = new TcpProxy('127.0.0.1', t.app.grpcPort);
    await proxy.start();
    const retries: RetryEvent[] = [];
    const client = createShardstockClient({ address: `127.0.0.1:${proxy.port}`, onRetry: (e) => retries.push(e) });
    const started = Date.now();
    try {
      const watch = (async () => {
        for await (const _ of client.watchStock({ couponId }, { deadlineMs: 2000 })) {
          // levels
        }
      })();
      await new Promise((r) => setTimeout(r, 1200));
      proxy.cut();
      proxy.restore();
      const err = await watch.then(
        () => undefined,
        (e: unknown) => e,
      );
      const took = Date.now() - started;
      expect(retries.map((r) => [r.method, r.code])).toContainEqual(['WatchStock', C.UNAVAILABLE]);
      expect(err).toBeInstanceOf(ShardstockCallError);
      expect((err as ShardstockCallError).code).toBe(C.DEADLINE_EXCEEDED);
      expect(took).toBeLessThan(2600);
    } finally {
      client.close();
      await proxy.close();
    }
  });
});

describe('watchStock and close()', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.close());

  it('when the client is closed while a watch is open or waiting to reconnect, then the watch ends CANCELLED and the server frees its stream', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 20n, shardCount: 2 });
    const proxy = new TcpProxy('127.0.0.1', t.app.grpcPort);
    await proxy.start();
    const client = createShardstockClient({ address: t.grpcAddr });
    // The other one waits to reconnect: its connection is cut and it backs off for long.
    const cut = createShardstockClient({ address: `127.0.0.1:${proxy.port}`, retry: { initialBackoffMs: 5000, maxBackoffMs: 5000 } });
    try {
      const watchUntilEnd = (c: typeof client) => {
        let messages = 0;
        const ended = (async () => {
          for await (const _ of c.watchStock({ couponId })) messages++;
        })().then(
          () => 'returned',
          (e: unknown) => e,
        );
        return { ended, messages: () => messages };
      };
      const open = watchUntilEnd(client);
      const waiting = watchUntilEnd(cut);
      const deadline = Date.now() + 5000;
      while ((open.messages() === 0 || waiting.messages() === 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(t.app.watch.stats().streams).toBe(2);
      proxy.cut();
      const closedAt = Date.now();
      client.close();
      cut.close();
      for (const w of [open, waiting]) {
        const end = await Promise.race([w.ended, new Promise((r) => setTimeout(() => r('still open'), 2000))]);
        expect(end).toBeInstanceOf(ShardstockCallError);
        expect((end as ShardstockCallError).code).toBe(C.CANCELLED);
        expect((end as ShardstockCallError).details).toBe('the client was closed');
      }
      expect(Date.now() - closedAt).toBeLessThan(1000);
      const freeBy = Date.now() + 2000;
      while (t.app.watch.stats().streams > 0 && Date.now() < freeBy) await new Promise((r) => setTimeout(r, 20));
      expect(t.app.watch.stats().streams).toBe(0);
    } finally {
      client.close();
      cut.close();
      await proxy.close();
    }
  });

  it('when the client is closed while a Deduct waits to retry, then the call ends at once, CANCELLED and in doubt, instead of waiting out its backoff', async () => {
    // A port nothing listens on: every attempt fails UNAVAILABLE and the call waits before the next.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    let waiting = false;
    const client = createShardstockClient({
      address: `127.0.0.1:${port}`,
      retry: { initialBackoffMs: 5000, maxBackoffMs: 5000 },
      onRetry: () => {
        waiting = true;
      },
    });
    const call = client.deduct({ couponId: 'c-closed', quantity: 1n }, { deadlineMs: 20_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    while (!waiting) await new Promise((r) => setTimeout(r, 10));
    const closedAt = Date.now();
    client.close();
    const err = await call;
    expect(Date.now() - closedAt).toBeLessThan(500);
    expect(err).toBeInstanceOf(ShardstockCallError);
    expect(err).toMatchObject({ code: C.CANCELLED, details: 'the client was closed', attempts: 1, inDoubt: true });
  });
});
