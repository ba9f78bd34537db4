// Access control and limits on a running instance, on both ports: bearer tokens with roles, per-caller rate
// limits with retry-after-ms, load shedding at the in-flight bound, and deadlines reaching the handlers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { createInventoryClient } from '../src/client/grpc-client.js';
import { DomainError } from '../src/domain/errors.js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { inventoryRoutes } from '../src/transport/connect-routes.js';
import { startGrpcServer } from '../src/transport/grpc-server.js';
import type { CallContext, InventoryHandlers } from '../src/transport/handlers.js';
import { startHttpServer } from '../src/transport/http-server.js';
import { loadConfig } from '../src/config.js';
import { shardState } from './support/inspect.js';
import { freePort } from './support/ports.js';
import { spawnTs } from './support/processes.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

const C = grpc.status;
const ADMIN = 'admin-token-0123456789abcdef';
const DEDUCT = 'deduct-token-0123456789abcdef';
const FILED = 'file-token-0123456789abcdef';
const bearer = (token: string) => ({ metadata: { authorization: `Bearer ${token}` } });
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => C.OK,
    (e: grpc.ServiceError) => e.code,
  );

/** A Connect JSON call: the gRPC code its error maps to (0 for OK), the HTTP status and the headers. */
async function connectCall(t: TestApp, method: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${t.httpUrl}/inventory.v1.InventoryService/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { code?: string; message?: string };
  const codes: Record<string, number> = {
    unauthenticated: C.UNAUTHENTICATED,
    permission_denied: C.PERMISSION_DENIED,
    resource_exhausted: C.RESOURCE_EXHAUSTED,
    unavailable: C.UNAVAILABLE,
    not_found: C.NOT_FOUND,
    deadline_exceeded: C.DEADLINE_EXCEEDED,
  };
  return { code: res.ok ? C.OK : (codes[json.code ?? ''] ?? -1), http: res.status, message: json.message ?? '', headers: res.headers };
}

describe('bearer-token authentication with roles', () => {
  let t: TestApp;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokens-'));
    writeFileSync(join(dir, 'tokens'), `# one per line\nwarehouse:deduct:${FILED}\n`);
    t = await startTestApp({
      SHARDSTOCK_AUTH: 'token',
      SHARDSTOCK_AUTH_TOKENS: `ops:admin:${ADMIN},checkout:deduct:${DEDUCT}`,
      SHARDSTOCK_AUTH_TOKENS_FILE: join(dir, 'tokens'),
    });
  });
  afterAll(async () => t?.close());

  it('when a gRPC call has no token or an unknown one, then UNAUTHENTICATED', async () => {
    expect(await codeOf(t.client.getStock({ couponId: 'x' }))).toBe(C.UNAUTHENTICATED);
    expect(await codeOf(t.client.getStock({ couponId: 'x' }, bearer('not-a-known-token-at-all')))).toBe(C.UNAUTHENTICATED);
    expect(await codeOf(t.client.getStock({ couponId: 'x' }, { metadata: { authorization: ADMIN } }))).toBe(C.UNAUTHENTICATED);
  });

  it('when the deduct role calls each RPC, then Deduct/Compensate/GetStock/WatchStock pass and the admin RPCs are PERMISSION_DENIED; admin passes everywhere', async () => {
    const couponId = uniqueId();
    expect(await codeOf(t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 2 }, bearer(DEDUCT)))).toBe(C.PERMISSION_DENIED);
    await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 2 }, bearer(ADMIN));
    for (const token of [DEDUCT, FILED]) {
      expect((await t.client.deduct({ couponId, requestId: `r-${token.slice(0, 4)}`, quantity: 1n }, bearer(token))).outcome).toBe(
        DeductOutcome.DEDUCTED,
      );
      expect(await codeOf(t.client.compensate({ couponId, requestId: `r-${token.slice(0, 4)}`, reason: 'x' }, bearer(token)))).toBe(C.OK);
      expect(await codeOf(t.client.getStock({ couponId }, bearer(token)))).toBe(C.OK);
      expect(await codeOf(t.client.restock({ couponId, quantity: 1n, requestId: 'rs' }, bearer(token)))).toBe(C.PERMISSION_DENIED);
      expect(await codeOf(t.client.reconcile({ couponId }, bearer(token)))).toBe(C.PERMISSION_DENIED);
    }
    const ac = new AbortController();
    const first = await t.client
      .watchStock({ couponId }, { ...bearer(DEDUCT), signal: ac.signal })
      [Symbol.asyncIterator]()
      .next();
    ac.abort();
    expect(first.value?.level?.couponId).toBe(couponId);
    expect(await codeOf(t.client.restock({ couponId, quantity: 1n, requestId: 'rs' }, bearer(ADMIN)))).toBe(C.OK);
  });

  it('when the same calls come over Connect, then the same decisions, as HTTP 401 / 403', async () => {
    const none = await connectCall(t, 'GetStock', { couponId: 'x' });
    expect([none.code, none.http]).toEqual([C.UNAUTHENTICATED, 401]);
    const denied = await connectCall(t, 'CreateCoupon', { couponId: uniqueId(), totalStock: '1' }, { authorization: `Bearer ${DEDUCT}` });
    expect([denied.code, denied.http]).toEqual([C.PERMISSION_DENIED, 403]);
    expect(denied.message).toMatch(/checkout \(role deduct\) may not call CreateCoupon/);
    expect((await connectCall(t, 'GetStock', { couponId: 'unknown-coupon' }, { authorization: `Bearer ${DEDUCT}` })).code).toBe(
      C.NOT_FOUND,
    );
  });

  it('when auth is on, then health checks still answer without a token', async () => {
    const res = await fetch(`${t.httpUrl}/healthz`);
    expect(res.status).toBe(200);
    expect(await rawUnary(t, '/grpc.health.v1.Health/Check', {})).toBe(C.OK);
  });

  it('when a stream (WatchStock, health Watch, reflection v1 and v1alpha) comes without a token, then it is UNAUTHENTICATED; with one it is served', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 5n, shardCount: 1 }, bearer(ADMIN));
    const watchNoToken = await t.client
      .watchStock({ couponId })
      [Symbol.asyncIterator]()
      .next()
      .then(
        () => C.OK,
        (e: grpc.ServiceError) => e.code,
      );
    expect(watchNoToken).toBe(C.UNAUTHENTICATED);
    // Reflection's list_services request (field 7) and an empty HealthCheckRequest.
    const LIST_SERVICES = Buffer.from([0x3a, 0x00]);
    const streams = [
      ['/grpc.health.v1.Health/Watch', Buffer.alloc(0), 'server'],
      ['/grpc.reflection.v1.ServerReflection/ServerReflectionInfo', LIST_SERVICES, 'bidi'],
      ['/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo', LIST_SERVICES, 'bidi'],
    ] as const;
    for (const [path, body, kind] of streams) {
      expect(await rawStream(t, path, body, kind, {}), path).toBe(C.UNAUTHENTICATED);
      expect(await rawStream(t, path, body, kind, { authorization: 'Bearer not-a-known-token-at-all' }), path).toBe(C.UNAUTHENTICATED);
      expect(await rawStream(t, path, body, kind, { authorization: `Bearer ${DEDUCT}` }), path).toBe(C.OK);
    }
  });

  it("when the live page's coupon list is asked without a token, then 401; with a token, the list", async () => {
    const none = await fetch(`${t.httpUrl}/ui/coupons`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { code: string }).code).toBe('unauthenticated');
    const ok = await fetch(`${t.httpUrl}/ui/coupons`, { headers: { authorization: `Bearer ${DEDUCT}` } });
    expect(ok.status).toBe(200);
    expect(Array.isArray(await ok.json())).toBe(true);
    // The page itself (no data in it) stays open, so a browser can load it and then send a token.
    expect((await fetch(`${t.httpUrl}/`)).status).toBe(200);
  });
});

/** A unary call by path with raw bytes: its status code. */
function rawUnary(t: TestApp, path: string, metadata: Record<string, string>): Promise<number> {
  const client = new grpc.Client(t.grpcAddr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise<number>((resolve) =>
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.alloc(0),
      md,
      (err) => {
        client.close();
        resolve(err ? err.code : C.OK);
      },
    ),
  );
}

/** Opens a server or bidi stream by path: OK once a first message arrives, else the status it ended with. */
function rawStream(t: TestApp, path: string, body: Buffer, kind: 'server' | 'bidi', metadata: Record<string, string>): Promise<number> {
  const client = new grpc.Client(t.grpcAddr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  const id = (b: Buffer) => b;
  return new Promise<number>((resolve) => {
    const call =
      kind === 'server' ? client.makeServerStreamRequest(path, id, id, body, md) : client.makeBidiStreamRequest(path, id, id, md);
    if (kind === 'bidi') (call as grpc.ClientDuplexStream<Buffer, Buffer>).write(body);
    const done = (code: number) => {
      call.cancel();
      client.close();
      resolve(code);
    };
    call.on('data', () => done(C.OK));
    call.on('error', (e: grpc.ServiceError) => done(e.code));
  });
}

describe('closed by default', () => {
  it('when the configuration binds a non-loopback address and says nothing about auth, then loading it fails; `off` said explicitly, loopback, or token auth all load', () => {
    expect(() => loadConfig({ SHARDSTOCK_GRPC_ADDR: '0.0.0.0:50051' })).toThrow(
      /refusing to serve 0\.0\.0\.0:50051 without authentication/,
    );
    expect(() => loadConfig({ SHARDSTOCK_HTTP_ADDR: '[::]:8080' })).toThrow(/without authentication/);
    expect(() => loadConfig({ SHARDSTOCK_GRPC_ADDR: '10.1.2.3:50051' })).toThrow(/SHARDSTOCK_AUTH=token/);
    expect(loadConfig({ SHARDSTOCK_GRPC_ADDR: '0.0.0.0:50051', SHARDSTOCK_AUTH: 'off' }).auth).toBe('off');
    expect(loadConfig({ SHARDSTOCK_GRPC_ADDR: '127.0.0.2:50051', SHARDSTOCK_HTTP_ADDR: '[::1]:8080' }).auth).toBe('off');
    expect(loadConfig({ SHARDSTOCK_GRPC_ADDR: 'localhost:50051' }).auth).toBe('off');
    expect(
      loadConfig({ SHARDSTOCK_GRPC_ADDR: '0.0.0.0:50051', SHARDSTOCK_AUTH: 'token', SHARDSTOCK_AUTH_TOKENS: `ops:admin:${ADMIN}` }).auth,
    ).toBe('token');
  });

  it('when a token is a placeholder from a sample file, then the configuration is refused', () => {
    for (const token of [
      'REPLACE-with-a-long-random-token',
      'changeme-changeme-changeme',
      'xxxxxxxxxxxxxxxxxxxx',
      'your-token-goes-here-123',
    ]) {
      expect(() => loadConfig({ SHARDSTOCK_AUTH: 'token', SHARDSTOCK_AUTH_TOKENS: `ops:admin:${token}` }), token).toThrow(/placeholder/);
    }
  });

  it('when the service is started on 0.0.0.0 with auth unset, then it exits with code 2 and says why, before it listens', async () => {
    const port = await freePort();
    const child = spawnTs('src/main.ts', [], { SHARDSTOCK_GRPC_ADDR: `0.0.0.0:${port}`, SHARDSTOCK_AUTH: '' });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(2);
    expect(out).toMatch(/refusing to serve 0\.0\.0\.0:\d+ without authentication/);
  });

  it('when reflection is turned off, then its calls are UNIMPLEMENTED and everything else is served', async () => {
    const t = await startTestApp({ SHARDSTOCK_REFLECTION: 'off' });
    try {
      const LIST_SERVICES = Buffer.from([0x3a, 0x00]);
      expect(await rawStream(t, '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo', LIST_SERVICES, 'bidi', {})).toBe(
        C.UNIMPLEMENTED,
      );
      expect(await rawUnary(t, '/grpc.health.v1.Health/Check', {})).toBe(C.OK);
      expect(await codeOf(t.client.getStock({ couponId: 'nope' }))).toBe(C.NOT_FOUND);
    } finally {
      await t.close();
    }
  });
});

describe('per-caller rate limits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      SHARDSTOCK_RATE_LIMIT_RPS: '5',
      SHARDSTOCK_RATE_LIMIT_BURST: '5',
      SHARDSTOCK_AUTH: 'token',
      SHARDSTOCK_AUTH_TOKENS: `ops:admin:${ADMIN},checkout:deduct:${DEDUCT}`,
    });
  });
  afterAll(async () => t?.close());

  it('when a caller sends 10 calls at once with a burst of 5, then exactly 5 pass and 5 are RESOURCE_EXHAUSTED with retry-after-ms; after that wait it passes again', async () => {
    const errs = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.client.getStock({ couponId: 'nope' }, bearer(DEDUCT)).then(
          () => null,
          (e: grpc.ServiceError) => e,
        ),
      ),
    );
    const limited = errs.filter((e) => e?.code === C.RESOURCE_EXHAUSTED);
    expect(errs.filter((e) => e?.code === C.NOT_FOUND)).toHaveLength(5);
    expect(limited).toHaveLength(5);
    const waits = limited.map((e) => Number(e!.metadata.get('retry-after-ms')[0]));
    expect(waits.every((w) => w > 0 && w <= 200)).toBe(true);
    expect(limited[0]!.details).toMatch(/rate limit of 5 calls\/s for token:checkout exceeded; retry after \d+ ms/);
    // Another caller is not affected.
    expect(await codeOf(t.client.getStock({ couponId: 'nope' }, bearer(ADMIN)))).toBe(C.NOT_FOUND);
    await new Promise((r) => setTimeout(r, Math.max(...waits) + 20));
    expect(await codeOf(t.client.getStock({ couponId: 'nope' }, bearer(DEDUCT)))).toBe(C.NOT_FOUND);
  });

  it('when the caller moves to the Connect port, then it is the same bucket, and the refusal is HTTP 429 with retry-after-ms', async () => {
    await new Promise((r) => setTimeout(r, 1100));
    // Spend the burst over gRPC, then ask over Connect straight away.
    await Promise.all(Array.from({ length: 5 }, () => codeOf(t.client.getStock({ couponId: 'nope' }, bearer(DEDUCT)))));
    const r = await connectCall(t, 'GetStock', { couponId: 'nope' }, { authorization: `Bearer ${DEDUCT}` });
    expect([r.code, r.http]).toEqual([C.RESOURCE_EXHAUSTED, 429]);
    expect(Number(r.headers.get('retry-after-ms'))).toBeGreaterThan(0);
    expect(r.message).toMatch(/retry after \d+ ms/);
  });
});

describe('load shedding at the in-flight bound', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ SHARDSTOCK_MAX_IN_FLIGHT: '2' });
  });
  afterAll(async () => t?.close());

  it('when 300 Deducts arrive at once and only 2 may run, then the rest are shed UNAVAILABLE with retry-after-ms at once (not queued), and shed calls took nothing', async () => {
    const couponId = uniqueId();
    await t.client.createCoupon({ couponId, totalStock: 1000n, shardCount: 4 });
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        t.client.deduct({ couponId, requestId: `shed-${i}`, quantity: 1n }).then(
          (r) => ({ ok: r.outcome === DeductOutcome.DEDUCTED, e: null }),
          (e: grpc.ServiceError) => ({ ok: false, e }),
        ),
      ),
    );
    const shed = results.filter((r) => r.e?.code === C.UNAVAILABLE);
    const ok = results.filter((r) => r.ok);
    expect(ok.length + shed.length).toBe(300);
    expect(shed.length).toBeGreaterThan(0);
    expect(shed.every((r) => r.e!.metadata.get('retry-after-ms')[0] === '50')).toBe(true);
    expect(shed[0]!.e!.details).toMatch(/limit of 2 calls in flight/);
    expect((await shardState(t.app, couponId)).net).toBe(ok.length);
    expect(t.app.gate.refused.shed).toBeGreaterThanOrEqual(shed.length);
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('deadlines reach the handlers on both ports', () => {
  // Handlers that only finish when their call's signal aborts: they record when that happened.
  const aborted: { via: string; afterMs: number }[] = [];
  const waiting = (via: string) => (_req: unknown, ctx: CallContext) =>
    new Promise((_, reject) => {
      const t0 = Date.now();
      ctx.signal.addEventListener('abort', () => {
        aborted.push({ via, afterMs: Date.now() - t0 });
        reject(new DomainError('deadline_exceeded', 'gave up'));
      });
    });

  it("when a gRPC client sets a 300 ms deadline, then the handler's signal aborts about then and the client gets DEADLINE_EXCEEDED", async () => {
    const server = await startGrpcServer('127.0.0.1:0', { deduct: waiting('grpc') } as unknown as InventoryHandlers, {
      maxMessageBytes: 65536,
      onUnexpected: () => {},
    });
    const client = createInventoryClient(`127.0.0.1:${server.port}`);
    try {
      expect(await codeOf(client.deduct({ couponId: 'c', requestId: 'r' }, { deadlineMs: 300 }))).toBe(C.DEADLINE_EXCEEDED);
      await new Promise((r) => setTimeout(r, 200));
      const a = aborted.find((x) => x.via === 'grpc');
      expect(a).toBeDefined();
      expect(a!.afterMs).toBeLessThan(5000);
    } finally {
      client.close();
      server.server.forceShutdown();
    }
  });

  it("when a Connect client sends connect-timeout-ms: 300, then the handler's signal aborts and the answer is deadline_exceeded", async () => {
    const http = await startHttpServer('127.0.0.1:0', {
      routes: inventoryRoutes({ deduct: waiting('connect') } as unknown as InventoryHandlers, { onUnexpected: () => {} }),
      plain: [],
      maxMessageBytes: 65536,
    });
    try {
      const r = await connectCall(
        { httpUrl: `http://127.0.0.1:${http.port}` } as TestApp,
        'Deduct',
        { couponId: 'c', requestId: 'r' },
        { 'connect-timeout-ms': '300' },
      );
      expect(r.code).toBe(C.DEADLINE_EXCEEDED);
      expect(aborted.find((x) => x.via === 'connect')).toBeDefined();
    } finally {
      await http.close(0);
    }
  });
});

describe('token rotation without a restart', () => {
  it('when the tokens file is rewritten and the process gets SIGHUP, then the new token is accepted and the removed one refused; a broken file changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokens-'));
    const file = join(dir, 'tokens');
    const OLD = 'old-token-5f1e9c2a7b3d8e40';
    const NEW = 'new-token-a93c0d7e2f6b1845';
    writeFileSync(file, `ops:admin:${OLD}\n`);
    const [grpcPort, httpPort] = [await freePort(), await freePort()];
    const child = spawnTs('src/main.ts', [], {
      SHARDSTOCK_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
      SHARDSTOCK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
      SHARDSTOCK_MYSQL_URL: 'mysql://root@127.0.0.1:3306/shardstock_test',
      SHARDSTOCK_NAMESPACE: uniqueId('rot'),
      SHARDSTOCK_WORKERS: 'none',
      SHARDSTOCK_AUTH: 'token',
      SHARDSTOCK_AUTH_TOKENS_FILE: file,
      SHARDSTOCK_LOG_LEVEL: 'info',
    });
    let logs = '';
    child.stdout!.on('data', (d) => (logs += d));
    child.stderr!.on('data', (d) => (logs += d));
    const client = createInventoryClient(`127.0.0.1:${grpcPort}`);
    try {
      const until = Date.now() + 30_000;
      while (!logs.includes('shardstock serving')) {
        if (Date.now() > until || child.exitCode !== null) throw new Error(`did not start: ${logs}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const call = (token: string) => codeOf(client.getStock({ couponId: 'nope' }, bearer(token)));
      expect([await call(OLD), await call(NEW)]).toEqual([C.NOT_FOUND, C.UNAUTHENTICATED]);
      const reloaded = async (marker: string) => {
        const seen = logs.split(marker).length;
        child.kill('SIGHUP');
        while (logs.split(marker).length === seen) await new Promise((r) => setTimeout(r, 50));
      };
      writeFileSync(file, `ops:admin:${NEW}\n`);
      await reloaded('tokens reloaded');
      expect([await call(OLD), await call(NEW)]).toEqual([C.UNAUTHENTICATED, C.NOT_FOUND]);
      writeFileSync(file, 'ops:admin:short\n');
      await reloaded('tokens not reloaded');
      expect([await call(OLD), await call(NEW)]).toEqual([C.UNAUTHENTICATED, C.NOT_FOUND]);
    } finally {
      client.close();
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });
});
