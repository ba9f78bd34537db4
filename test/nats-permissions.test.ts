// NATS credentials and subject permissions: a private nats-server runs deploy/nats/permissions.conf (for this
// test's namespace); the service connects with SHARDSTOCK_NATS_USER/_PASSWORD and settles a deduction through
// it; without credentials it cannot start; another user can neither publish settlement events nor touch the
// settlement stream.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection, StringCodec } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { freePort } from './support/ports.js';
import { settled, sleep } from './support/settlement.js';

const SERVICE_PW = 'svc-9d2f7a61c4e8b035';
const OBSERVER_PW = 'obs-41c7e9a2d6f80b53';
const namespace = `np${Date.now().toString(36)}`;
let dir: string;
let server: ChildProcess;
let url: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'shardstock-natsperm-'));
  const rules = readFileSync(new URL('../deploy/nats/permissions.conf', import.meta.url), 'utf8')
    .replaceAll('shardstock.', `${namespace}.`)
    .replaceAll('shardstock_settlement', `${namespace}_settlement`);
  writeFileSync(join(dir, 'permissions.conf'), rules);
  const port = await freePort();
  writeFileSync(
    join(dir, 'server.conf'),
    `listen: 127.0.0.1:${port}\njetstream { store_dir: "${join(dir, 'js')}" }\ninclude permissions.conf\n`,
  );
  server = spawn('nats-server', ['-c', join(dir, 'server.conf')], {
    stdio: 'ignore',
    env: { ...process.env, SHARDSTOCK_NATS_PASSWORD: SERVICE_PW, OBSERVER_NATS_PASSWORD: OBSERVER_PW },
  });
  url = `nats://127.0.0.1:${port}`;
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      await (await connect({ servers: url, user: 'observer', pass: OBSERVER_PW })).close();
      break;
    } catch (err) {
      if (Date.now() > until) throw err;
      await sleep(100);
    }
  }
});
afterAll(() => {
  server?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('NATS credentials and subject permissions', () => {
  let t: TestApp;
  afterAll(async () => t?.close());

  it('when the service has no NATS credentials, then it cannot start', async () => {
    await expect(startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_NATS_URL: url })).rejects.toThrow(/Authorization/i);
  });

  it('when the service connects as the shardstock user, then a deduction is relayed and settled through the restricted server', async () => {
    t = await startTestApp({
      SHARDSTOCK_NAMESPACE: namespace,
      SHARDSTOCK_NATS_URL: url,
      SHARDSTOCK_NATS_USER: 'shardstock',
      SHARDSTOCK_NATS_PASSWORD: SERVICE_PW,
      SHARDSTOCK_WORKERS: 'relay,settle',
    });
    const couponId = uniqueId('np');
    await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 2 });
    expect((await t.client.deduct({ couponId, requestId: 'r1', quantity: 3n })).outcome).toBe(DeductOutcome.DEDUCTED);
    const r = await settled(t.client, couponId, 30_000);
    expect(r.consistent).toBe(true);
    expect((await t.client.getStock({ couponId })).level?.settledRemaining).toBe(7n);
  });

  it('when another user publishes a settlement event or edits the stream, then the server refuses it and the settler never sees it', async () => {
    const sc = StringCodec();
    const service: NatsConnection = await connect({ servers: url, user: 'shardstock', pass: SERVICE_PW });
    const observer: NatsConnection = await connect({ servers: url, user: 'observer', pass: OBSERVER_PW });
    const errors: string[] = [];
    void (async () => {
      for await (const s of observer.status()) if (s.type === 'error') errors.push(String(s.data));
    })();
    try {
      const seen: string[] = [];
      const sub = service.subscribe(`${namespace}.events.probe`, { callback: (_e, m) => seen.push(sc.decode(m.data)) });
      await service.flush();
      observer.publish(`${namespace}.events.probe`, sc.encode('forged'));
      service.publish(`${namespace}.events.probe`, sc.encode('genuine'));
      await observer.flush().catch(() => {});
      await service.flush();
      await sleep(300);
      expect(seen).toEqual(['genuine']);
      sub.unsubscribe();

      const deleteStream = await observer.request(`$JS.API.STREAM.DELETE.${namespace}_settlement`, sc.encode(''), { timeout: 1000 }).then(
        () => 'allowed',
        (e: Error) => e.message,
      );
      expect(deleteStream).not.toBe('allowed');
      const info = await observer.request(`$JS.API.STREAM.INFO.${namespace}_settlement`, sc.encode(''), { timeout: 1000 });
      expect(JSON.parse(sc.decode(info.data)).config.name).toBe(`${namespace}_settlement`);
    } finally {
      await service.close();
      await observer.close();
    }
  });
});
