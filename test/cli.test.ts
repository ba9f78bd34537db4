// The operator CLI as operators run it: bin/shardstock.mjs in a child process, against a real in-process
// instance (real Redis Cluster, NATS JetStream, MariaDB). Calls are asynchronous child processes: a
// synchronous spawn would block this process's event loop, and with it the server under test.
import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certDir, type CertDir } from './support/certs.js';
import { shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

const LAUNCHER = new URL('../bin/shardstock.mjs', import.meta.url).pathname;

let t: TestApp;
beforeAll(async () => {
  // relay + settle so Reconcile sees deductions reach MySQL.
  t = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await t?.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string> = {}, addr = t.grpcAddr): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [LAUNCHER, ...args],
      { env: { ...process.env, SHARDSTOCK_GRPC_ADDR: addr, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The one JSON object a --json command printed. */
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON, whose fields the assertions walk
function json(r: Run): Record<string, any> {
  const lines = r.stdout.trim().split('\n');
  expect(lines, `stdout: ${r.stdout}\nstderr: ${r.stderr}`).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

describe('shardstock coupon / deduct / compensate', () => {
  it('when a coupon is created, deducted from, compensated and restocked, then every --json answer counts exactly', async () => {
    const id = uniqueId('cli');
    const created = await cli(['coupon', 'create', id, '--stock', '100', '--shards', '4', '--json']);
    expect(created.code).toBe(0);
    expect(json(created)).toMatchObject({ created: true, coupon: { couponId: id, totalStock: 100, shardCount: 4, perUserLimit: 0 } });

    const d = await cli(['deduct', id, '--quantity', '3', '--request-id', 'r-1', '--json']);
    expect(d.code).toBe(0);
    expect(json(d)).toMatchObject({ couponId: id, requestId: 'r-1', outcome: 'deducted', replayed: false });

    const level = json(await cli(['coupon', 'get', id, '--shards', '--json']));
    expect(level).toMatchObject({ couponId: id, totalStock: 100, available: 97, deducted: 3, soldOut: false });
    expect(level.shards).toHaveLength(4);
    expect(level.shards.reduce((s: number, x: { available: number }) => s + x.available, 0)).toBe(97);

    const comp = await cli(['compensate', id, 'r-1', '--reason', 'order cancelled', '--json']);
    expect(comp.code).toBe(0);
    expect(json(comp)).toMatchObject({ outcome: 'compensated' });

    const restock = await cli(['coupon', 'restock', id, '--quantity', '10', '--request-id', 'rs-1', '--json']);
    expect(restock.code).toBe(0);
    expect(json(restock)).toMatchObject({ requestId: 'rs-1', replayed: false, level: { totalStock: 110, available: 110, deducted: 0 } });

    // The service's own view agrees with what the CLI printed.
    const server = (await t.client.getStock({ couponId: id })).level!;
    expect(server.available).toBe(110n);
    expect(server.totalStock).toBe(110n);
  });

  it('when output is for humans, then it is a table with one row per shard and the outcome spelled out', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 4 });
    const [get, d] = await Promise.all([cli(['coupon', 'get', id, '--shards']), cli(['deduct', id, '--request-id', 'h-1'])]);
    expect(get.code).toBe(0);
    expect(get.stdout).toMatch(/^total stock\s+40$/m);
    expect(get.stdout).toMatch(/^shard\s+available\s+in transit/m);
    expect(get.stdout.split('\n').filter((l) => /^\s+[0-3]\s+(9|10)\s+0\s/.test(l))).toHaveLength(4);
    expect(d.code).toBe(0);
    expect(d.stdout).toMatch(/^DEDUCTED$/m);
    expect(d.stdout).toMatch(/^request id\s+h-1$/m);
  });

  it('when the service says no, then the exit code is 3 (sold out, not deducted)', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 1n, shardCount: 1 });
    await t.client.deduct({ couponId: id, requestId: 'a', quantity: 1n });
    const [soldOut, notDeducted] = await Promise.all([
      cli(['deduct', id, '--request-id', 'b', '--json']),
      cli(['compensate', id, 'never-made', '--json']),
    ]);
    expect(soldOut.code).toBe(3);
    expect(json(soldOut)).toMatchObject({ outcome: 'sold_out' });
    expect(notDeducted.code).toBe(3);
    expect(json(notDeducted)).toMatchObject({ outcome: 'not_deducted' });
  });

  it('when a load run deducts past the stock, then exactly the stock is deducted and the rest is sold out', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 4 });
    const r = await cli(['deduct', id, '--count', '80', '--concurrency', '8', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const summary = json(r);
    expect(summary).toMatchObject({ couponId: id, count: 80, completed: 80, concurrency: 8, errors: {} });
    expect(summary.outcomes).toEqual({ deducted: 50, sold_out: 30 });
    expect(summary.latencyMs.p50).toBeGreaterThan(0);
    const level = (await t.client.getStock({ couponId: id })).level!;
    expect(level).toMatchObject({ available: 0n, deducted: 50n, soldOut: true });
  });
});

describe('shardstock errors and help', () => {
  it('when the service refuses a call, then the exit code is 10 + the gRPC code and stderr is one line', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 1 });
    const [conflict, missing, invalid] = await Promise.all([
      cli(['coupon', 'create', id, '--stock', '6', '--shards', '1']),
      cli(['coupon', 'get', uniqueId('nope'), '--json']),
      cli(['deduct', 'bad id with spaces']),
    ]);
    expect(conflict.code).toBe(16);
    expect(conflict.stderr.trim().split('\n')).toHaveLength(1);
    expect(conflict.stderr).toContain('ALREADY_EXISTS');
    expect(conflict.stderr).toContain('total_stock=5');

    expect(missing.code).toBe(15);
    expect(missing.stderr).toMatch(/NOT_FOUND: coupon .* does not exist/);
    expect(json(missing)).toMatchObject({ error: { code: 'NOT_FOUND', exitCode: 15 } });

    expect(invalid.code).toBe(13);
    expect(invalid.stderr).toContain('INVALID_ARGUMENT');
  });

  it('when nothing listens at the address, then exit 24 and the message names the address', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const r = await cli(['coupon', 'get', 'x', '--addr', `127.0.0.1:${port}`, '--deadline', '3000']);
    expect(r.code).toBe(24);
    expect(r.stderr).toContain(`cannot reach shardstock at 127.0.0.1:${port}`);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('when arguments are wrong, then exit 2 with a pointer to --help', async () => {
    const [noCoupon, noStock, unknownOpt, unknownCmd] = await Promise.all([
      cli(['deduct']),
      cli(['coupon', 'create', 'x']),
      cli(['coupon', 'get', 'x', '--bogus']),
      cli(['frobnicate']),
    ]);
    for (const r of [noCoupon, noStock, unknownOpt, unknownCmd]) {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('--help');
    }
    expect(noStock.stderr).toContain('--stock is required');
  });

  it('when a number option is empty, blanks, hex or an exponent (an unset shell variable), then exit 2 naming it and nothing is created', async () => {
    const id = uniqueId('cli-num');
    const runs = await Promise.all(
      ['', ' ', '0x10', '1e3', '+5'].map((stock) => cli(['coupon', 'create', id, '--stock', stock, '--shards', '2', '--json'])),
    );
    for (const r of runs) {
      expect(r.code, r.stdout).toBe(2);
      expect(r.stderr).toContain('--stock must be an integer');
    }
    // Not created with 0 units (a coupon's stock cannot be defined again: the right call would be ALREADY_EXISTS).
    expect((await cli(['coupon', 'get', id])).code).toBe(10 + 5);
    expect(json(await cli(['coupon', 'create', id, '--stock', '1_000', '--json'])).coupon.totalStock).toBe(1000);
  });

  it('when --help is given to any command, then its usage is printed and the exit code is 0', async () => {
    const cmds = ['serve', 'stack', 'coupon', 'deduct', 'compensate', 'watch', 'reconcile'];
    const runs = await Promise.all([cli(['--help']), ...cmds.map((c) => cli([c, '--help'])), cli(['help', 'bench'])]);
    for (const r of runs) expect(r.code).toBe(0);
    for (const c of cmds) expect(runs[0]!.stdout).toContain(`  ${c} `);
    for (const [i, c] of cmds.entries()) expect(runs[i + 1]!.stdout).toContain(`shardstock ${c}`);
    expect(runs.at(-1)!.stdout).toContain('shardstock bench');
  });
});

describe('shardstock watch / reconcile', () => {
  it('when a coupon is watched and another client deducts, then the next line shows the new level', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2 });
    const child = spawn(process.execPath, [LAUNCHER, 'watch', id, '--json', '--count', '2'], {
      env: { ...process.env, SHARDSTOCK_GRPC_ADDR: t.grpcAddr },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b) => (stderr += b));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    try {
      const first = JSON.parse((await lines.next()).value as string);
      expect(first).toMatchObject({ couponId: id, available: 20, deducted: 0 });
      await t.client.deduct({ couponId: id, requestId: 'w-1', quantity: 5n });
      const second = JSON.parse((await lines.next()).value as string);
      expect(second).toMatchObject({ couponId: id, available: 15, deducted: 5 });
      expect(await exited, stderr).toBe(0);
    } finally {
      child.kill();
    }
  });

  it('when deductions have settled, then reconcile reports the ledger and exits 0 as consistent', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 30n, shardCount: 3 });
    for (let i = 0; i < 7; i++) await t.client.deduct({ couponId: id, requestId: `rc-${i}`, quantity: 1n });
    await t.client.compensate({ couponId: id, requestId: 'rc-0', reason: 'test' });

    // Settlement is asynchronous: wait (through the client) until MySQL has both events, then ask the CLI.
    const deadline = Date.now() + 45_000;
    while (Date.now() < deadline) {
      const rec = await t.client.reconcile({ couponId: id });
      if (rec.ledgerDeducted === 7n && rec.ledgerCompensated === 1n && rec.consistent) break;
      await new Promise((res) => setTimeout(res, 300));
    }
    const [r, human] = await Promise.all([cli(['reconcile', id, '--json']), cli(['reconcile', id])]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r)).toMatchObject({
      couponId: id,
      consistent: true,
      totalStock: 30,
      ledgerDeducted: 7,
      ledgerCompensated: 1,
      settledRemaining: 24,
      redisAvailable: 24,
      ledgerDrift: 0,
      redisDrift: 0,
    });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`${id}: CONSISTENT`);
    expect(human.stdout).toMatch(/mysql\s+ledger deducted\s+7/);
  });

  it('when a shard lost units and one vanished, then reconcile --repair rebuilds and restores them to the bound and exits 0', async () => {
    const id = uniqueId('cli');
    await t.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 4 });
    const coupon = (await t.app.repo.find(id))!;
    // Behind the service's back, shard 0 loses 3 units: a repair restores them.
    await t.app.redis.hincrby(t.app.store.keys(shardRef(coupon, 0)).shard, 'avail', -3);
    const r = await cli(['reconcile', id, '--repair', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r)).toMatchObject({
      consistent: true,
      redisAvailable: 40,
      repair: { rebuiltShards: [], restoredUnits: 3, loweredUnits: 0, bound: 40 },
    });
    // Then shard 1 vanishes: the repair rebuilds it with what the others do not hold.
    const held = Number(await t.app.redis.hget(t.app.store.keys(shardRef(coupon, 1)).shard, 'avail'));
    await t.app.redis.del(t.app.store.keys(shardRef(coupon, 1)).shard);
    const rebuilt = await cli(['reconcile', id, '--repair', '--json']);
    expect(json(rebuilt)).toMatchObject({
      consistent: true,
      redisAvailable: 40,
      repair: { rebuiltShards: [1], loadedUnits: held, restoredUnits: 0 },
    });
    const again = await cli(['reconcile', id, '--repair']);
    expect(again.stdout).toContain('repair: rebuilt shards [] with 0 units, lowered 0, restored 0');
  });
});

describe('shardstock over TLS with a token', () => {
  let certs: CertDir;
  let secure: TestApp;
  const token = `cli-${crypto.randomUUID()}`;
  beforeAll(async () => {
    certs = certDir();
    certs.authority('ca');
    certs.issue('server', 'ca');
    certs.issue('client', 'ca');
    secure = await startTestApp({
      SHARDSTOCK_GRPC_TLS_CERT: certs.file('server.crt'),
      SHARDSTOCK_GRPC_TLS_KEY: certs.file('server.key'),
      SHARDSTOCK_GRPC_TLS_CLIENT_CA: certs.file('ca.crt'),
      SHARDSTOCK_AUTH: 'token',
      SHARDSTOCK_AUTH_TOKENS: `ops:admin:${token}`,
    });
  });
  afterAll(async () => {
    await secure?.close();
    certs?.remove();
  });

  it('when --ca, --cert, --key and --token are given, then commands work over mTLS; without the client certificate the handshake fails', async () => {
    const id = uniqueId('cli');
    const tls = ['--ca', certs.file('ca.crt'), '--cert', certs.file('client.crt'), '--key', certs.file('client.key'), '--token', token];
    const created = await cli(['coupon', 'create', id, '--stock', '5', '--shards', '1', '--json', ...tls], {}, secure.grpcAddr);
    expect(created.code, created.stderr).toBe(0);
    const d = await cli(['deduct', id, '--quantity', '2', '--json', ...tls], {}, secure.grpcAddr);
    expect(d.code, d.stderr).toBe(0);
    expect(json(d)).toMatchObject({ outcome: 'deducted', attempts: 1 });
    const noCert = await cli(
      ['coupon', 'get', id, '--tls', '--ca', certs.file('ca.crt'), '--token', token, '--deadline', '1500'],
      {},
      secure.grpcAddr,
    );
    expect(noCert.code).toBe(24);
    expect(noCert.stderr.trim().split('\n'), noCert.stderr).toHaveLength(1);
    expect(noCert.stderr).toContain(`TLS with shardstock at ${secure.grpcAddr} failed`);
  });

  it('when a token would go in plaintext to a non-loopback address, then nothing is sent: exit 2 and one line saying why', async () => {
    const [flagged, fromEnv, halfPair] = await Promise.all([
      cli(['coupon', 'get', 'x', '--addr', '10.255.255.1:50051', '--token', token]),
      cli(['deduct', 'x', '--addr', 'inventory.internal:50051'], { SHARDSTOCK_CLI_TOKEN: token }),
      cli(['coupon', 'get', 'x', '--cert', certs.file('client.crt')]),
    ]);
    for (const r of [flagged, fromEnv]) {
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/refusing to send the token in plaintext to .* \(not loopback\): add --tls/);
    }
    expect(halfPair.code).toBe(2);
    expect(halfPair.stderr).toContain('--cert and --key go together');
  });
});
