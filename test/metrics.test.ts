// /metrics counts exactly the calls made on both transports; call logs carry request ids and no secrets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { createPool } from 'mysql2/promise';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { InventoryService } from '../src/gen/inventory/v1/inventory_pb.js';
import { loadConfig } from '../src/config.js';
import { startApp } from '../src/app/app.js';
import { createInventoryClient } from '../src/client/grpc-client.js';
import { createLogger } from '../src/util/logger.js';
import { startTestApp, TEST_DB_URL, uniqueId, type TestApp } from './support/harness.js';
import { spawnTs } from './support/processes.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

/** Parses the Prometheus text format into `name{labels}` -> value (labels as sent, in order). */
async function scrape(url: string): Promise<Map<string, number>> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  const samples = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    samples.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return samples;
}
const rpc = (m: Map<string, number>, transport: string, method: string, outcome: string) =>
  m.get(`shardstock_rpc_requests_total{transport="${transport}",method="${method}",outcome="${outcome}"}`) ?? 0;

describe('/metrics', () => {
  it('when calls are made on both ports, then the RPC counters and latency histograms count exactly those calls', async () => {
    const id = uniqueId('m');
    const connect = createClient(InventoryService, createConnectTransport({ baseUrl: t.httpUrl, httpVersion: '1.1' }));
    await t.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 2 });
    for (let i = 0; i < 3; i++) await t.client.deduct({ couponId: id, requestId: `g${i}`, quantity: 1n });
    await t.client.deduct({ couponId: id, requestId: 'g0', quantity: 1n }); // replay
    for (let i = 0; i < 2; i++) await connect.deduct({ couponId: id, requestId: `c${i}`, quantity: 1n });
    for (let i = 0; i < 4; i++) await connect.deduct({ couponId: id, requestId: `s${i}`, quantity: 1n }); // sold out
    await connect.compensate({ couponId: id, requestId: 'c0', reason: 'test' });
    await t.client.deduct({ couponId: uniqueId('none'), requestId: 'x', quantity: 1n }).catch(() => {});
    await connect.getStock({ couponId: id }).catch(() => {});
    await connect.getStock({ couponId: 'bad id!' }).catch(() => {});

    const m = await scrape(t.httpUrl);
    expect(rpc(m, 'grpc', 'CreateCoupon', 'ok')).toBe(1);
    expect(rpc(m, 'grpc', 'Deduct', 'deducted')).toBe(3);
    expect(rpc(m, 'grpc', 'Deduct', 'replayed')).toBe(1);
    expect(rpc(m, 'grpc', 'Deduct', 'not_found')).toBe(1);
    expect(rpc(m, 'connect', 'Deduct', 'deducted')).toBe(2);
    expect(rpc(m, 'connect', 'Deduct', 'sold_out')).toBe(4);
    expect(rpc(m, 'connect', 'Compensate', 'compensated')).toBe(1);
    expect(rpc(m, 'connect', 'GetStock', 'ok')).toBe(1);
    expect(rpc(m, 'connect', 'GetStock', 'invalid_argument')).toBe(1);
    expect(m.get('shardstock_rpc_duration_seconds_count{transport="grpc",method="Deduct"}')).toBe(5);
    expect(m.get('shardstock_rpc_duration_seconds_count{transport="connect",method="Deduct"}')).toBe(6);
    expect(m.get('shardstock_rpc_duration_seconds_bucket{transport="connect",method="Deduct",le="+Inf"}')).toBe(6);

    // Figures kept by the components, read at scrape time.
    const s = t.app.deduct.stats;
    expect(s.soldOutFastPath).toBeGreaterThan(0); // the last sold-out answers came from memory
    expect(m.get('shardstock_sold_out_fast_path_total')).toBe(s.soldOutFastPath);
    expect(m.get('shardstock_fallback_moves_total')).toBe(s.moves);
    expect(m.get('shardstock_deduct_fallbacks_total')).toBe(s.fallbacks);
    // Every deduction that reached Redis ran the deduct script once per round: at least once per call.
    expect(m.get('shardstock_redis_op_duration_seconds_count{op="deduct"}')).toBeGreaterThanOrEqual(6);
    expect(m.get('shardstock_redis_op_duration_seconds_count{op="initShard"}')).toBe(2);
    expect(m.get('shardstock_ready')).toBe(1);
    for (const dep of ['redis', 'mysql', 'nats']) expect(m.get(`shardstock_dependency_up{dependency="${dep}"}`)).toBe(1);
    expect(m.has('process_cpu_user_seconds_total')).toBe(true);
  });

  it('when a watch stream is open and then cancelled, then the open-stream gauge follows it and the stream is counted once, as cancelled', async () => {
    const id = uniqueId('m');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1 });
    const connect = createClient(InventoryService, createConnectTransport({ baseUrl: t.httpUrl, httpVersion: '1.1' }));
    const before = await scrape(t.httpUrl);
    const ac = new AbortController();
    const it = connect.watchStock({ couponId: id }, { signal: ac.signal })[Symbol.asyncIterator]();
    await it.next();
    const open = await scrape(t.httpUrl);
    expect(open.get('shardstock_watch_streams_open{transport="connect"}')).toBe(1);
    expect(open.get('shardstock_watch_feeds')).toBe(1);
    expect(open.get('shardstock_watch_level_subscriptions')).toBe(1);
    expect(open.get(`shardstock_coupon_available{coupon="${id}"}`)).toBe(10);
    ac.abort();
    await it.next().catch((e) => expect(ConnectError.from(e).code).toBe(Code.Canceled));
    const deadline = Date.now() + 10_000;
    while (t.app.watch.stats().streams > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const after = await scrape(t.httpUrl);
    expect(after.get('shardstock_watch_streams_open{transport="connect"}')).toBe(0);
    expect(rpc(after, 'connect', 'WatchStock', 'cancelled') - rpc(before, 'connect', 'WatchStock', 'cancelled')).toBe(1);
    expect(
      after.get('shardstock_watch_messages_total{transport="connect"}')! -
        (before.get('shardstock_watch_messages_total{transport="connect"}') ?? 0),
    ).toBe(1);
    // Per-coupon series exist only while the coupon is watched.
    expect([...after.keys()].some((k) => k.includes(id))).toBe(false);
  });

  it('when many coupons and requests went through, then no label carries a request id, and coupon ids appear only on the bounded watched-coupon gauges', async () => {
    const m = await scrape(t.httpUrl);
    for (const key of m.keys()) {
      expect(key).not.toMatch(/requestId|request_id|g0|c0/);
      if (/coupon=/.test(key)) expect(key).toMatch(/^shardstock_coupon_(available|pending_settlement)\{coupon=/);
    }
    const series = new Set([...m.keys()].map((k) => k.split('{')[0]));
    expect(series.size).toBeLessThan(200);
  });
});

describe('logs', () => {
  it('when calls are logged, then each line about a call carries its request ids, and the MySQL password never appears', async () => {
    // A MySQL user with a password, so the service holds a real secret in its configuration.
    const password = `pw-${uniqueId('secret')}`;
    const user = `ss_log_${Date.now().toString(36)}`;
    const admin = createPool({ uri: TEST_DB_URL, connectionLimit: 1 });
    await admin.query(`CREATE USER '${user}'@'127.0.0.1' IDENTIFIED BY '${password}'`);
    await admin.query(`GRANT ALL ON shardstock_test.* TO '${user}'@'127.0.0.1'`);
    const lines: Record<string, unknown>[] = [];
    const raw: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) {
          raw.push(l);
          lines.push(JSON.parse(l));
        }
        cb();
      },
    });
    const config = loadConfig({
      SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
      SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
      SHARDSTOCK_MYSQL_URL: TEST_DB_URL.replace('root@', `${user}:${password}@`),
      SHARDSTOCK_NAMESPACE: `l${Date.now().toString(36)}`,
      SHARDSTOCK_WORKERS: 'none',
      SHARDSTOCK_LOG_LEVEL: 'debug',
    });
    const app = await startApp(config, createLogger(config.logLevel, { instance: 'log-test' }, sink));
    const client = createInventoryClient(`127.0.0.1:${app.grpcPort}`);
    try {
      const id = uniqueId('log');
      await client.createCoupon({ couponId: id, totalStock: 2n, shardCount: 1 }, { metadata: { 'x-request-id': 'trace-create-1' } });
      await client.deduct(
        { couponId: id, requestId: 'deduct-req-7', quantity: 1n, userId: 'alice.user-42' },
        { metadata: { 'x-request-id': 'trace-deduct-1' } },
      );
      const connect = createClient(
        InventoryService,
        createConnectTransport({ baseUrl: `http://127.0.0.1:${app.httpPort}`, httpVersion: '1.1' }),
      );
      await connect.deduct({ couponId: id, requestId: 'deduct-req-8', quantity: 1n }, { headers: { 'x-request-id': 'trace-deduct-2' } });
      await connect.getStock({ couponId: id }); // no x-request-id: the service makes one up
      await new Promise((r) => setTimeout(r, 50));

      const calls = lines.filter((l) => l.msg === 'call');
      const grpcDeduct = calls.find((l) => l.method === 'Deduct' && l.transport === 'grpc');
      expect(grpcDeduct).toMatchObject({
        rid: 'trace-deduct-1',
        requestId: 'deduct-req-7',
        couponId: id,
        outcome: 'deducted',
        instance: 'log-test',
      });
      expect(calls.find((l) => l.method === 'Deduct' && l.transport === 'connect')).toMatchObject({
        rid: 'trace-deduct-2',
        requestId: 'deduct-req-8',
        outcome: 'deducted',
      });
      expect(calls.find((l) => l.method === 'CreateCoupon')).toMatchObject({ rid: 'trace-create-1', couponId: id });
      expect(calls.find((l) => l.method === 'GetStock')?.rid).toMatch(/^[0-9a-f]{12}$/);
      expect(calls).toHaveLength(4);
      const text = raw.join('\n');
      expect(text).not.toContain(password);
      expect(text).not.toContain('alice.user-42'); // user ids are personal data: not logged
      expect(lines.every((l) => typeof l.time === 'string' && typeof l.level === 'number')).toBe(true);
    } finally {
      client.close();
      await app.close();
      await admin.query(`DROP USER '${user}'@'127.0.0.1'`);
      await admin.end();
    }
  });
});

describe('secrets in the logs of a failed start-up', () => {
  const SECRET = 'Hunter2-very-secret-pw';
  const startWith = async (mysqlUrl: string) => {
    const child = spawnTs('src/main.ts', [], {
      SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
      SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
      SHARDSTOCK_MYSQL_URL: mysqlUrl,
      SHARDSTOCK_NAMESPACE: uniqueId('sec'),
      SHARDSTOCK_WORKERS: 'none',
      SHARDSTOCK_LOG_LEVEL: 'debug',
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    return { code, out };
  };

  it('when the MySQL URL cannot be parsed (Node keeps it whole in err.input), then the start-up fails and its logs hold no password', async () => {
    const { code, out } = await startWith(`mysql://root:${SECRET}@[127.0.0.1:3306/shardstock`);
    expect(code).toBe(1);
    expect(out).toContain('could not start');
    expect(out).toContain('[redacted]');
    expect(out).not.toContain(SECRET);
  });

  it('when the MySQL server refuses the password, then the start-up fails and its logs hold no password', async () => {
    const { code, out } = await startWith(`mysql://nobody:${SECRET}@127.0.0.1:3306/shardstock_test`);
    expect(code).toBe(1);
    expect(out).toContain('could not start');
    expect(out).not.toContain(SECRET);
  });
});
