// The client's watchStock against a real instance: a stream the server ends normally (its lifetime ran out, the
// instance shuts down) is opened again, as the server's OK asks, and streams that end before their first level
// are opened a bounded number of times; a caller's deadline bounds the whole watch, reconnections included. The service, Redis, NATS and MariaDB are real; the connection is cut by a TCP proxy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
