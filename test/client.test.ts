// The client for internal services (`shardstock/client`) against real instances: request ids made for the
// caller and reused by every retry, the server's retry-after-ms honoured (load shedding, rate limits), no
// retry of an answer, one overall deadline, cancellation, stream reconnection, TLS with a bearer token.
// Faults on the client's side of the wire (a lost answer) are injected by a grpc-js interceptor; the
// service, Redis, NATS and MariaDB are real.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import {
  createShardstockClient,
  DeductOutcome,
  PlaintextTokenError,
  ShardstockCallError,
  type RetryEvent,
  type ShardstockClient,
  type ShardstockClientOptions,
} from 'shardstock/client';
import { certDir, type CertDir } from './support/certs.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { TcpProxy } from './support/tcp-proxy.js';

const C = grpc.status;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What the client put on the wire, per attempt; optionally the first Deduct's answer is lost on the way back
 * (the server did the work, the caller sees UNAVAILABLE), as when a connection breaks after the request. */
function wire(o: { loseFirstDeductAnswer?: boolean } = {}) {
  const sent: { at: number; method: string; requestId: string; xRequestId: string | undefined }[] = [];
  let deducts = 0;
  const interceptor: grpc.Interceptor = (options, nextCall) => {
    const method = options.method_definition.path.split('/').pop()!;
    const lose = o.loseFirstDeductAnswer === true && method === 'Deduct' && deducts++ === 0;
    let xRequestId: string | undefined;
    return new grpc.InterceptingCall(nextCall(options), {
      start(metadata, _listener, next) {
        xRequestId = metadata.get('x-request-id')[0]?.toString();
        next(metadata, {
          // The answer is passed on (grpc-js holds the status back until it is) and then replaced by a failure.
          onReceiveStatus(status, nextStatus) {
            nextStatus(
              lose && status.code === C.OK ? { ...status, code: C.UNAVAILABLE, details: 'answer lost on the way (test)' } : status,
            );
          },
        });
      },
      sendMessage(message, next) {
        sent.push({ at: Date.now(), method, requestId: (message as { requestId?: string }).requestId ?? '', xRequestId });
        next(message);
      },
    });
  };
  return { sent, interceptor };
}

function clientOf(address: string, o: Partial<ShardstockClientOptions> = {}) {
  const retries: RetryEvent[] = [];
  const client = createShardstockClient({ address, onRetry: (e) => retries.push(e), ...o });
  return { client, retries };
}

/** The error a call ended with (fails the test if it succeeded). */
async function failureOf(p: Promise<unknown>): Promise<ShardstockCallError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ShardstockCallError);
  return err as ShardstockCallError;
}

/** A TCP server that accepts connections and never says a word: calls to it can only time out. */
async function silentServer(): Promise<{ address: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    address: `127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('request ids and retries', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.close());

  it('when no request id is given and the first answer is lost, then the id made for the call is sent again and the retry is a replay: one deduction', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 2 });
    const w = wire({ loseFirstDeductAnswer: true });
    const { client, retries } = clientOf(t.grpcAddr, { channelOptions: { interceptors: [w.interceptor] } });
    try {
      const r = await client.deduct({ couponId, quantity: 2n });
      expect(r.requestId).toMatch(UUID);
      expect(r).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true, attempts: 2 });
      const deducts = w.sent.filter((s) => s.method === 'Deduct');
      expect(deducts.map((s) => s.requestId)).toEqual([r.requestId, r.requestId]);
      expect(deducts.map((s) => s.xRequestId)).toEqual([r.requestId, r.requestId]);
      expect(retries).toMatchObject([{ method: 'Deduct', requestId: r.requestId, attempt: 1, code: C.UNAVAILABLE }]);
      const level = (await t.client.getStock({ couponId })).level!;
      expect([level.available, level.deducted]).toEqual([8n, 2n]);

      // A given id is kept; a second call gets a new one.
      const mine = await client.deduct({ couponId, requestId: 'mine-1', quantity: 1n });
      const other = await client.deduct({ couponId, quantity: 1n });
      expect(mine).toMatchObject({ requestId: 'mine-1', attempts: 1, replayed: false });
      expect(other.requestId).toMatch(UUID);
      expect(other.requestId).not.toBe(r.requestId);
      expect((await t.client.getStock({ couponId })).level!.deducted).toBe(4n);
    } finally {
      client.close();
    }
  });

  it('when the service answers, then the answer is returned or thrown after one attempt: sold out, invalid argument, not found, failed precondition, a message too large', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 1n, shardCount: 1 });
    const { client, retries } = clientOf(t.grpcAddr);
    try {
      expect(await client.deduct({ couponId, requestId: 'a', quantity: 1n })).toMatchObject({
        outcome: DeductOutcome.DEDUCTED,
        attempts: 1,
      });
      expect(await client.deduct({ couponId, requestId: 'b', quantity: 1n })).toMatchObject({
        outcome: DeductOutcome.SOLD_OUT,
        attempts: 1,
      });
      const refused = await Promise.all([
        failureOf(client.deduct({ couponId: 'bad id', quantity: 1n })),
        failureOf(client.getStock({ couponId: uniqueId('none') })),
        failureOf(client.deduct({ couponId, requestId: 'a', quantity: 2n })),
        failureOf(client.getStock({ couponId: 'x'.repeat(100_000) })),
      ]);
      expect(refused.map((e) => e.code)).toEqual([C.INVALID_ARGUMENT, C.NOT_FOUND, C.FAILED_PRECONDITION, C.RESOURCE_EXHAUSTED]);
      for (const e of refused) expect(e).toMatchObject({ attempts: 1, reason: 'answer', inDoubt: false });
      expect(refused[0]!.details).toContain('coupon_id');
      expect(retries).toEqual([]);
      expect((await t.client.getStock({ couponId })).level!.deducted).toBe(1n);
    } finally {
      client.close();
    }
  });

  it('when a stream breaks, then watchStock opens it again and goes on with the current level', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 20n, shardCount: 2 });
    const proxy = new TcpProxy('127.0.0.1', t.app.grpcPort);
    await proxy.start();
    const { client, retries } = clientOf(`127.0.0.1:${proxy.port}`);
    const ac = new AbortController();
    try {
      const levels = client.watchStock({ couponId }, { signal: ac.signal })[Symbol.asyncIterator]();
      expect((await levels.next()).value?.level?.available).toBe(20n);
      proxy.cut();
      await t.client.deduct({ couponId, requestId: 'w-1', quantity: 3n });
      proxy.restore();
      // The level after the break; a message the old stream sent before it broke may come first.
      let next = await levels.next();
      if (next.value?.level?.available === 20n) next = await levels.next();
      expect(next.value?.level).toMatchObject({ available: 17n, deducted: 3n });
      expect(retries.map((r) => [r.method, r.code])).toContainEqual(['WatchStock', C.UNAVAILABLE]);
      await levels.return?.();
    } finally {
      ac.abort();
      client.close();
      await proxy.close();
    }
  });
});

describe("the server's retry-after-ms", () => {
  it('when the server sheds load (1 call in flight), then every shed call waits at least the retry-after-ms it was sent and is deducted exactly once', async () => {
    const t = await startTestApp({ SHARDSTOCK_MAX_IN_FLIGHT: '1' });
    const w = wire();
    // 40 callers for one slot: many are shed several times; what is asserted is how each retry waits.
    const { client, retries } = clientOf(t.grpcAddr, {
      channelOptions: { interceptors: [w.interceptor] },
      deadlineMs: 30_000,
      retry: { maxAttempts: 40 },
    });
    try {
      const couponId = uniqueId();
      await client.createCoupon({ couponId, totalStock: 100n, shardCount: 4 });
      const results = await Promise.all(Array.from({ length: 40 }, () => client.deduct({ couponId, quantity: 1n })));
      expect(results.every((r) => r.outcome === DeductOutcome.DEDUCTED && !r.replayed)).toBe(true);
      expect(new Set(results.map((r) => r.requestId)).size).toBe(40);
      expect(retries.length).toBeGreaterThan(0);
      for (const r of retries) {
        expect(r).toMatchObject({ code: C.UNAVAILABLE, retryAfterMs: 50 });
        expect(r.delayMs).toBeGreaterThanOrEqual(50);
      }
      // On the wire: each retry carried the same id, and came no sooner than the server asked.
      const byId = Map.groupBy(
        w.sent.filter((s) => s.method === 'Deduct'),
        (s) => s.requestId,
      );
      expect([...byId.keys()].sort()).toEqual(results.map((r) => r.requestId).sort());
      for (const r of results) {
        const sends = byId.get(r.requestId)!;
        expect(sends).toHaveLength(r.attempts);
        for (let i = 1; i < sends.length; i++) expect(sends[i]!.at - sends[i - 1]!.at).toBeGreaterThanOrEqual(49);
      }
      expect(results.reduce((n, r) => n + r.attempts - 1, 0)).toBe(retries.filter((r) => r.method === 'Deduct').length);
      expect((await t.client.getStock({ couponId })).level!.deducted).toBe(40n);
    } finally {
      client.close();
      await t.close();
    }
  });

  describe('a rate limit of 2 calls/s', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({ SHARDSTOCK_RATE_LIMIT_RPS: '2', SHARDSTOCK_RATE_LIMIT_BURST: '1' });
    });
    afterAll(async () => t?.close());
    const drain = async (client: ShardstockClient) => {
      // Use up the bucket: the next call is refused with RESOURCE_EXHAUSTED and retry-after-ms.
      await client.getStock({ couponId: 'none' }).catch(() => {});
    };

    it('when a call is rate limited, then it is retried after the retry-after-ms the server sent', async () => {
      const { client, retries } = clientOf(t.grpcAddr, { deadlineMs: 5000 });
      try {
        await drain(client);
        const started = Date.now();
        const e = await failureOf(client.getStock({ couponId: uniqueId('none') }));
        const elapsed = Date.now() - started;
        expect(e).toMatchObject({ code: C.NOT_FOUND, attempts: 2 });
        expect(retries).toHaveLength(1);
        expect(retries[0]).toMatchObject({ code: C.RESOURCE_EXHAUSTED });
        expect(retries[0]!.retryAfterMs).toBeGreaterThan(100);
        expect(elapsed).toBeGreaterThanOrEqual(retries[0]!.retryAfterMs!);
      } finally {
        client.close();
      }
    });

    it('when the server asks for a wait longer than the deadline, then the call gives up at once with its answer', async () => {
      const { client, retries } = clientOf(t.grpcAddr, { deadlineMs: 150 });
      try {
        await drain(client);
        const started = Date.now();
        const e = await failureOf(client.getStock({ couponId: 'none' }));
        expect(Date.now() - started).toBeLessThan(150);
        expect(e).toMatchObject({ code: C.RESOURCE_EXHAUSTED, attempts: 1, reason: 'deadline', inDoubt: false });
        expect(Number(e.metadata?.get('retry-after-ms')[0])).toBeGreaterThan(150);
        expect(retries).toEqual([]);
      } finally {
        client.close();
      }
    });

    it('when the caller aborts while the client waits to retry, then the call ends at once, CANCELLED', async () => {
      const { client } = clientOf(t.grpcAddr, { deadlineMs: 5000 });
      try {
        await drain(client);
        const ac = new AbortController();
        const started = Date.now();
        const p = failureOf(client.deduct({ couponId: 'none', quantity: 1n }, { signal: ac.signal }));
        setTimeout(() => ac.abort(), 100);
        const e = await p;
        expect(Date.now() - started).toBeLessThan(300);
        expect(e).toMatchObject({ code: C.CANCELLED, reason: 'cancelled', attempts: 1, inDoubt: false });
        expect(e.requestId).toMatch(UUID);
      } finally {
        client.close();
      }
    });
  });
});

describe('deadlines and cancellation without a server', () => {
  let silent: Awaited<ReturnType<typeof silentServer>>;
  beforeAll(async () => {
    silent = await silentServer();
  });
  afterAll(async () => silent?.close());

  it('when nothing listens, then the call retries UNAVAILABLE until its deadline and no longer', async () => {
    const port = await closedPort();
    const { client, retries } = clientOf(`127.0.0.1:${port}`, { deadlineMs: 800 });
    try {
      const started = Date.now();
      const e = await failureOf(client.deduct({ couponId: 'c', quantity: 1n }));
      const elapsed = Date.now() - started;
      expect(elapsed).toBeLessThanOrEqual(850);
      expect(e.code).toBe(C.UNAVAILABLE);
      expect(e.attempts).toBeGreaterThanOrEqual(3);
      expect(['deadline', 'attempts']).toContain(e.reason);
      expect(e.requestId).toMatch(UUID);
      expect(new Set(retries.map((r) => r.requestId))).toEqual(new Set([e.requestId]));
    } finally {
      client.close();
    }
  });

  it('when the server never answers, then the call ends DEADLINE_EXCEEDED at its deadline; with a shorter attempt timeout, attempts are retried within it', async () => {
    const { client } = clientOf(silent.address, { deadlineMs: 500 });
    const { client: patient, retries } = clientOf(silent.address, { deadlineMs: 900, attemptTimeoutMs: 200 });
    try {
      let started = Date.now();
      const e = await failureOf(client.deduct({ couponId: 'c', quantity: 1n }));
      expect(Date.now() - started).toBeGreaterThanOrEqual(480);
      expect(Date.now() - started).toBeLessThan(900);
      expect(e).toMatchObject({ code: C.DEADLINE_EXCEEDED, attempts: 1, inDoubt: true });

      started = Date.now();
      const p = await failureOf(patient.deduct({ couponId: 'c', quantity: 1n }));
      expect(Date.now() - started).toBeLessThan(1300);
      expect(p.code).toBe(C.DEADLINE_EXCEEDED);
      expect(p.attempts).toBeGreaterThanOrEqual(3);
      expect(retries.every((r) => r.code === C.DEADLINE_EXCEEDED && r.requestId === p.requestId)).toBe(true);
    } finally {
      client.close();
      patient.close();
    }
  });

  it('when the caller aborts a call in flight, then it ends at once, CANCELLED and in doubt', async () => {
    const { client } = clientOf(silent.address, { deadlineMs: 10_000 });
    try {
      const ac = new AbortController();
      const started = Date.now();
      const p = failureOf(client.deduct({ couponId: 'c', quantity: 1n }, { signal: ac.signal }));
      setTimeout(() => ac.abort(), 150);
      const e = await p;
      expect(Date.now() - started).toBeLessThan(500);
      expect(e).toMatchObject({ code: C.CANCELLED, reason: 'cancelled', inDoubt: true });
      // An aborted signal stops a call before its first attempt.
      const again = await failureOf(client.getStock({ couponId: 'c' }, { signal: ac.signal }));
      expect(again).toMatchObject({ code: C.CANCELLED, attempts: 0 });
    } finally {
      client.close();
    }
  });
});

describe('TLS and a bearer token', () => {
  let certs: CertDir;
  let t: TestApp;
  const token = `tk-${crypto.randomUUID()}`;
  beforeAll(async () => {
    certs = certDir();
    certs.authority('ca');
    certs.issue('server', 'ca');
    t = await startTestApp({
      SHARDSTOCK_GRPC_TLS_CERT: certs.file('server.crt'),
      SHARDSTOCK_GRPC_TLS_KEY: certs.file('server.key'),
      SHARDSTOCK_AUTH: 'token',
      SHARDSTOCK_AUTH_TOKENS: `svc:admin:${token}`,
    });
  });
  afterAll(async () => {
    await t?.close();
    certs?.remove();
  });

  it('when the client trusts the CA and sends the token, then it is served; without the token it is refused once, UNAUTHENTICATED', async () => {
    const { readFileSync } = await import('node:fs');
    const ca = readFileSync(certs.file('ca.crt'));
    const good = createShardstockClient({ address: t.grpcAddr, tls: { ca }, token });
    const anonymous = createShardstockClient({ address: t.grpcAddr, tls: { ca } });
    try {
      const couponId = uniqueId();
      await good.createCoupon({ couponId, totalStock: 3n, shardCount: 1 });
      expect(await good.deduct({ couponId, quantity: 1n })).toMatchObject({ outcome: DeductOutcome.DEDUCTED, attempts: 1 });
      expect((await good.getStock({ couponId })).level!.deducted).toBe(1n);
      expect(await failureOf(anonymous.getStock({ couponId }))).toMatchObject({ code: C.UNAUTHENTICATED, attempts: 1 });
    } finally {
      good.close();
      anonymous.close();
    }
  });

  it('when a token would go in plaintext to another machine, then the client refuses to be made; to loopback it is allowed', () => {
    expect(() => createShardstockClient({ address: '10.255.255.1:50051', token })).toThrow(PlaintextTokenError);
    expect(() => createShardstockClient({ address: 'dns:///inventory.internal:50051', token })).toThrow(/plaintext/);
    createShardstockClient({ address: '10.255.255.1:50051', token, tls: true }).close();
    createShardstockClient({ address: 'localhost:50051', token }).close();
  });
});
