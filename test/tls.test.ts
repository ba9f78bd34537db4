// TLS everywhere it is configurable: the gRPC port (TLS, and mTLS with a client CA), Redis (a TLS-only node
// with client certificates and an ACL user) and MySQL (the client insists on TLS). Certificates are made
// with openssl for each run, in a temp dir.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { createInventoryClient } from '../src/client/grpc-client.js';
import { openOrm } from '../src/db/orm.js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { certDir, type CertDir } from './support/certs.js';
import { startTestApp, TEST_DB_URL, uniqueId, type TestApp } from './support/harness.js';
import { freePort } from './support/ports.js';

let certs: CertDir;
const file = (name: string) => certs.file(name);
const pem = (name: string) => readFileSync(file(name));
const issue = (cn: string, ca: string) => certs.issue(cn, ca);

beforeAll(() => {
  certs = certDir();
  certs.authority('ca');
  certs.authority('other-ca');
  issue('server', 'ca');
  issue('client', 'ca');
  issue('stranger', 'other-ca');
});
afterAll(() => certs.remove());

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => grpc.status.OK,
    (e: grpc.ServiceError) => e.code,
  );
const tlsClient = (t: TestApp, key?: string) =>
  createInventoryClient(
    t.grpcAddr,
    {},
    grpc.credentials.createSsl(pem('ca.crt'), key ? pem(`${key}.key`) : null, key ? pem(`${key}.crt`) : null),
  );

describe('TLS on the gRPC port', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ SHARDSTOCK_GRPC_TLS_CERT: file('server.crt'), SHARDSTOCK_GRPC_TLS_KEY: file('server.key') });
  });
  afterAll(async () => t?.close());

  it('when a client trusts the CA, then it is served; a plaintext client is not', async () => {
    const c = tlsClient(t);
    try {
      expect(await codeOf(c.getStock({ couponId: 'none' }))).toBe(grpc.status.NOT_FOUND);
    } finally {
      c.close();
    }
    expect(await codeOf(t.client.getStock({ couponId: 'none' }, { deadlineMs: 3000 }))).toBe(grpc.status.UNAVAILABLE);
  });

  it('when the gRPC port speaks TLS, then the Kubernetes probes of deploy/k8s (/healthz, /readyz on the plaintext HTTP port) still pass', async () => {
    for (const path of ['/healthz', '/readyz']) expect((await fetch(`${t.httpUrl}${path}`)).status, path).toBe(200);
  });
});

describe('certificate rotation on the gRPC port', () => {
  let t: TestApp;
  beforeAll(async () => {
    writeFileSync(file('live.crt'), pem('server.crt'));
    writeFileSync(file('live.key'), pem('server.key'));
    t = await startTestApp({
      SHARDSTOCK_GRPC_TLS_CERT: file('live.crt'),
      SHARDSTOCK_GRPC_TLS_KEY: file('live.key'),
      SHARDSTOCK_GRPC_TLS_RELOAD_MS: '300',
    });
  });
  afterAll(async () => t?.close());

  it('when the certificate files are replaced, then new connections get the new certificate without a restart', async () => {
    const trusting = (ca: string) =>
      createInventoryClient(t.grpcAddr, { 'grpc.use_local_subchannel_pool': 1 }, grpc.credentials.createSsl(pem(`${ca}.crt`)));
    const before = [trusting('ca'), trusting('other-ca')];
    expect(await codeOf(before[0]!.getStock({ couponId: 'none' }))).toBe(grpc.status.NOT_FOUND);
    expect(await codeOf(before[1]!.getStock({ couponId: 'none' }, { deadlineMs: 3000 }))).toBe(grpc.status.UNAVAILABLE);
    for (const c of before) c.close();

    issue('renewed', 'other-ca');
    writeFileSync(file('live.crt'), pem('renewed.crt'));
    writeFileSync(file('live.key'), pem('renewed.key'));
    await new Promise((r) => setTimeout(r, 1000));
    const after = [trusting('ca'), trusting('other-ca')];
    try {
      expect(await codeOf(after[1]!.getStock({ couponId: 'none' }))).toBe(grpc.status.NOT_FOUND);
      expect(await codeOf(after[0]!.getStock({ couponId: 'none' }, { deadlineMs: 3000 }))).toBe(grpc.status.UNAVAILABLE);
    } finally {
      for (const c of after) c.close();
    }
  });
});

describe('mTLS on the gRPC port', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      SHARDSTOCK_GRPC_TLS_CERT: file('server.crt'),
      SHARDSTOCK_GRPC_TLS_KEY: file('server.key'),
      SHARDSTOCK_GRPC_TLS_CLIENT_CA: file('ca.crt'),
      // Through the reloading credentials (the TLS test above reads the files once): both paths are covered.
      SHARDSTOCK_GRPC_TLS_RELOAD_MS: '60000',
    });
  });
  afterAll(async () => t?.close());

  it('when the client shows a certificate from the client CA, then it is served; with none, or one from another CA, it is refused', async () => {
    const good = tlsClient(t, 'client');
    const none = tlsClient(t);
    const stranger = tlsClient(t, 'stranger');
    try {
      expect(await codeOf(good.getStock({ couponId: 'none' }))).toBe(grpc.status.NOT_FOUND);
      expect(await codeOf(none.getStock({ couponId: 'none' }, { deadlineMs: 3000 }))).toBe(grpc.status.UNAVAILABLE);
      expect(await codeOf(stranger.getStock({ couponId: 'none' }, { deadlineMs: 3000 }))).toBe(grpc.status.UNAVAILABLE);
    } finally {
      for (const c of [good, none, stranger]) c.close();
    }
  });
});

describe('TLS and an ACL user for Redis', () => {
  let port: number;
  let nodeDir: string;
  const cli = (...args: string[]) =>
    execFileSync(
      'redis-cli',
      [
        '--tls',
        '--cacert',
        file('ca.crt'),
        '--cert',
        file('client.crt'),
        '--key',
        file('client.key'),
        '-p',
        String(port),
        '--user',
        'shard',
        '--pass',
        'pw-0123456789',
        '--no-auth-warning',
        ...args,
      ],
      { encoding: 'utf8' },
    ).trim();

  beforeAll(async () => {
    port = await freePort();
    nodeDir = mkdtempSync(join(tmpdir(), 'shardstock-redis-tls-'));
    // TLS only (no plaintext port), client certificates required, the default user off.
    execFileSync('redis-server', [
      '--port',
      '0',
      '--tls-port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--cluster-announce-ip',
      '127.0.0.1',
      '--tls-cert-file',
      file('server.crt'),
      '--tls-key-file',
      file('server.key'),
      '--tls-ca-cert-file',
      file('ca.crt'),
      '--tls-auth-clients',
      'yes',
      '--tls-cluster',
      'yes',
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--dir',
      nodeDir,
      '--daemonize',
      'yes',
      '--pidfile',
      join(nodeDir, 'redis.pid'),
      '--logfile',
      join(nodeDir, 'redis.log'),
      '--save',
      '',
      '--appendonly',
      'no',
      '--user',
      'default',
      'off',
      '--user',
      'shard',
      'on',
      '>pw-0123456789',
      '~*',
      '&*',
      '+@all',
    ]);
    for (let i = 0; i < 50; i++) {
      try {
        if (cli('ping') === 'PONG') break;
      } catch {
        // not up yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    cli('cluster', 'addslotsrange', '0', '16383');
    for (let i = 0; i < 50 && !cli('cluster', 'info').includes('cluster_state:ok'); i++) await new Promise((r) => setTimeout(r, 100));
  });
  afterAll(() => {
    try {
      process.kill(Number(readFileSync(join(nodeDir, 'redis.pid'), 'utf8')), 'SIGKILL');
    } catch {
      // gone
    }
    rmSync(nodeDir, { recursive: true, force: true });
  });

  it('when the service is given the CA, a client certificate, the ACL user and its password, then it deducts over TLS', async () => {
    const t = await startTestApp({
      SHARDSTOCK_REDIS_NODES: `127.0.0.1:${port}`,
      SHARDSTOCK_REDIS_TLS: 'on',
      SHARDSTOCK_REDIS_TLS_CA: file('ca.crt'),
      SHARDSTOCK_REDIS_TLS_CERT: file('client.crt'),
      SHARDSTOCK_REDIS_TLS_KEY: file('client.key'),
      SHARDSTOCK_REDIS_USERNAME: 'shard',
      SHARDSTOCK_REDIS_PASSWORD: 'pw-0123456789',
      // One node, no replica: nothing to WAIT for.
      SHARDSTOCK_ACK_LEVEL: 'leader',
    });
    try {
      const couponId = uniqueId();
      await t.client.createCoupon({ couponId, totalStock: 5n, shardCount: 2 });
      expect((await t.client.deduct({ couponId, requestId: 'tls-1', quantity: 2n })).outcome).toBe(DeductOutcome.DEDUCTED);
      expect((await t.client.getStock({ couponId })).level?.available).toBe(3n);
      expect(Number(cli('dbsize'))).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
  });
});

describe('TLS for MySQL', () => {
  it('when TLS is asked for and the server offers none, then the connection is refused rather than made in plaintext', async () => {
    const err = await openOrm({ url: TEST_DB_URL, tls: { ca: pem('ca.crt') } }).then(
      async (orm) => {
        await orm.close(true);
        return null;
      },
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/secure connection|SSL|TLS/i);
  });
});
