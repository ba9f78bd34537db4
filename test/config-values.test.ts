// Bad SHARDSTOCK_* values refuse start-up with a message naming the variable: a value that is only blanks, or
// a number in a form an operator would not mean (hex, exponent, sign), must never be read as a number the
// service then runs with. Number(' ') is 0: a blank SHARDSTOCK_MAX_IN_FLIGHT turned shedding off, a blank
// SHARDSTOCK_RECONCILE_INTERVAL_MS turned the reconciler off, a blank SHARDSTOCK_SHUTDOWN_GRACE_MS cut every
// call in flight at SIGTERM, and 'host:' made port 0.
import { describe, expect, it } from 'vitest';
import { OrderOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { startTestApp, uniqueId } from './support/harness.js';
import { spawnTs } from './support/processes.js';

/** Every integer setting config.ts reads (with a min of 0 or more). */
const INTEGER_VARS = [
  'SHARDSTOCK_DEFAULT_SHARDS',
  'SHARDSTOCK_MAX_QUANTITY',
  'SHARDSTOCK_IDEMPOTENCY_WINDOW_S',
  'SHARDSTOCK_HOLD_SWEEP_MS',
  'SHARDSTOCK_SOLD_OUT_TTL_MS',
  'SHARDSTOCK_SHARD_BATCH_MAX',
  'SHARDSTOCK_SHARD_BATCH_WAIT_US',
  'SHARDSTOCK_SHARD_BATCH_GAP_US',
  'SHARDSTOCK_SHARD_BATCH_GAP_FROM',
  'SHARDSTOCK_SETTLE_BATCH',
  'SHARDSTOCK_SETTLE_MAX_DELIVER',
  'SHARDSTOCK_RECONCILE_INTERVAL_MS',
  'SHARDSTOCK_SHUTDOWN_GRACE_MS',
  'SHARDSTOCK_RATE_LIMIT_RPS',
  'SHARDSTOCK_MAX_IN_FLIGHT',
  'SHARDSTOCK_GRPC_TLS_RELOAD_MS',
  'SHARDSTOCK_MAX_CONNECTION_AGE_GRACE_MS',
];

/** Exits of `src/main.ts` started with `env`: the code and what it printed, or 'running' after `waitMs`. */
function start(env: Record<string, string>, waitMs: number): Promise<{ code: number | null | 'running'; out: string }> {
  const child = spawnTs('src/main.ts', [], {
    SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
    SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
    SHARDSTOCK_NAMESPACE: `cfg${Date.now().toString(36)}`,
    SHARDSTOCK_WORKERS: 'none',
    ...env,
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve({ code: 'running', out });
    }, waitMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('configuration values', () => {
  it('when an integer setting is blanks, hex, an exponent or signed, then loadConfig refuses it naming the variable', () => {
    for (const name of INTEGER_VARS) {
      for (const raw of [' ', '\t', '\n', '0x10', '1e3', '+5', '-0', '5 ms', '5.0']) {
        expect(() => loadConfig({ [name]: raw }), `${name}=${JSON.stringify(raw)}`).toThrow(ConfigError);
        expect(() => loadConfig({ [name]: raw }), `${name}=${JSON.stringify(raw)}`).toThrow(name);
      }
      // Empty is unset (docs/operations.md): the default.
      expect(() => loadConfig({ [name]: '' })).not.toThrow();
    }
    for (const raw of ['127.0.0.1:', '127.0.0.1: ', '127.0.0.1:0x1b59', '127.0.0.1:+7001']) {
      expect(() => loadConfig({ SHARDSTOCK_REDIS_NODES: raw }), raw).toThrow(/SHARDSTOCK_REDIS_NODES/);
      expect(() => loadConfig({ SHARDSTOCK_GRPC_ADDR: raw }), raw).toThrow(/SHARDSTOCK_GRPC_ADDR/);
    }
    expect(loadConfig({ SHARDSTOCK_MAX_IN_FLIGHT: '0', SHARDSTOCK_REDIS_NODES: '127.0.0.1:7001' }).maxInFlight).toBe(0);
    expect(loadConfig({ SHARDSTOCK_SHUTDOWN_GRACE_MS: '007' }).shutdownGraceMs).toBe(7);
  });

  it('when the service is started with a blank number or an empty port, then it exits with code 2 naming the variable, before it serves', async () => {
    const cases: Record<string, string>[] = [
      { SHARDSTOCK_MAX_IN_FLIGHT: ' ' },
      { SHARDSTOCK_RECONCILE_INTERVAL_MS: ' ' },
      { SHARDSTOCK_SHUTDOWN_GRACE_MS: '\t' },
      { SHARDSTOCK_REDIS_NODES: '127.0.0.1:7001,127.0.0.1:' },
      // Every order extends its holds to 7000 ms before it commits: each one was refused INVALID_ARGUMENT.
      { SHARDSTOCK_ORDER_COMMIT_MARGIN_MS: '5000', SHARDSTOCK_HOLD_TTL_MAX_MS: '5000', SHARDSTOCK_HOLD_TTL_DEFAULT_MS: '5000' },
    ];
    const runs = await Promise.all(cases.map((env) => start(env, 20_000)));
    runs.forEach((r, i) => {
      const name = Object.keys(cases[i]!)[0]!;
      expect(r.code, `${name}: ${r.out.slice(0, 500)}`).toBe(2);
      expect(r.out).toContain(`configuration error: ${name}`);
    });
  }, 60_000);

  it('when hold lengths do not fit the idempotency window or an order commit, then start-up refuses naming the variables', () => {
    expect(() => loadConfig({ SHARDSTOCK_IDEMPOTENCY_WINDOW_S: '3600', SHARDSTOCK_HOLD_TTL_MAX_MS: '3600000' })).toThrow(
      /SHARDSTOCK_HOLD_TTL_MAX_MS \(3600000\) must be at most half of SHARDSTOCK_IDEMPOTENCY_WINDOW_S/,
    );
    expect(() => loadConfig({ SHARDSTOCK_IDEMPOTENCY_WINDOW_S: '10' })).toThrow(
      /must fit in the longest hold \(5000: SHARDSTOCK_HOLD_TTL_MAX_MS, at most half of SHARDSTOCK_IDEMPOTENCY_WINDOW_S\)/,
    );
    expect(() => loadConfig({ SHARDSTOCK_ORDER_COMMIT_MARGIN_MS: '60000', SHARDSTOCK_HOLD_TTL_MAX_MS: '60000' })).toThrow(
      /SHARDSTOCK_ORDER_COMMIT_MARGIN_MS/,
    );
    // Unset, the bounds follow the window: what the hold service and the order service both use.
    const c = loadConfig({ SHARDSTOCK_IDEMPOTENCY_WINDOW_S: '900' });
    expect([c.holdTtlMinMs, c.holdTtlDefaultMs, c.holdTtlMaxMs]).toEqual([1000, 450_000, 450_000]);
    expect(loadConfig({}).holdTtlMaxMs).toBe(3_600_000);
  });

  it('when the idempotency window is 15 minutes, then orders are taken and committed (holds and orders share the hold bounds)', async () => {
    const t = await startTestApp({ SHARDSTOCK_IDEMPOTENCY_WINDOW_S: '900' });
    try {
      const couponId = uniqueId('cfg-ord');
      await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 1 });
      const r = await t.client.deductOrder({ requestId: uniqueId('o'), userId: 'u1', items: [{ couponId, quantity: 2n }] });
      expect(r.outcome).toBe(OrderOutcome.DEDUCTED);
      const level = (await t.client.getStock({ couponId })).level!;
      expect([level.deducted, level.held]).toEqual([2n, 0n]);
    } finally {
      await t.close();
    }
  });
});
