// Orders under a short idempotency window. A hold lasts at most half a window; orders checked ttl_ms (and filled
// in its default) against the configured hold TTLs instead of that cap, so every item's Reserve refused what the
// order let in. And an order's record must be kept as long as its items' hold records: a retry that found the
// items' records but not the order's decided the order again from them, and answered a compensated order
// DEDUCTED (as if this retry had just taken it).
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { OrderOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { rejection } from './support/rejection.js';
import { ledgerFigures, settled } from './support/settlement.js';

const WINDOW_S = 3;
let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({
    SHARDSTOCK_WORKERS: 'relay,settle',
    SHARDSTOCK_INSTANCE_ID: 'order-window',
    SHARDSTOCK_IDEMPOTENCY_WINDOW_S: String(WINDOW_S),
    SHARDSTOCK_ORDER_COMMIT_MARGIN_MS: '200',
    SHARDSTOCK_ORDER_SWEEP_MS: '50',
  });
});
afterAll(async () => {
  await a?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('an order under a window shorter than the configured hold TTLs', () => {
  it('gets holds of at most half the window: ttl_ms 0 is the capped default, and a ttl_ms above the cap is INVALID_ARGUMENT before anything is opened', async () => {
    const x = uniqueId('otx');
    await a.client.createCoupon({ couponId: x, totalStock: 10n, shardCount: 2 });
    const items = [{ couponId: x, quantity: 1n }];
    const before = Date.now();
    const d = await a.client.deductOrder({ requestId: uniqueId('otd'), userId: 'u1', items });
    expect(d.outcome).toBe(OrderOutcome.DEDUCTED);
    const r = await a.client.reserveOrder({ requestId: uniqueId('otr'), userId: 'u1', items });
    expect(r.outcome).toBe(OrderOutcome.RESERVED);
    const expiresAtMs = Number(r.expiresAt?.seconds ?? 0n) * 1000 + Math.floor((r.expiresAt?.nanos ?? 0) / 1e6);
    expect(expiresAtMs - before).toBeLessThanOrEqual(WINDOW_S * 500 + 1000);

    const orderId = uniqueId('otl');
    const long = await rejection(a.client.reserveOrder({ requestId: orderId, userId: 'u1', items, ttlMs: 2000 }));
    expect([long?.code, long?.details.startsWith('ttl_ms')]).toEqual([status.INVALID_ARGUMENT, true]);
    // Nothing was opened under that id: the same id with a ttl_ms in range is a new order.
    const ok = await a.client.reserveOrder({ requestId: orderId, userId: 'u1', items, ttlMs: 1000 });
    expect([ok.outcome, ok.replayed]).toEqual([OrderOutcome.RESERVED, false]);
    expect((await a.client.getStock({ couponId: x })).level?.available).toBe(7n);
  });
});

describe('order timing against the longest hold', () => {
  it('a hold maximum too short for the commit margin and the order sweeps is refused at startup, naming the settings', () => {
    // Before, it started, and every DeductOrder answered INVALID_ARGUMENT "ttl_ms ... got 7000" (the extension
    // before a commit), a value its caller never sent, leaving its holds taken until the sweeper abandoned it.
    expect(() => loadConfig({ SHARDSTOCK_HOLD_TTL_MAX_MS: '5000', SHARDSTOCK_HOLD_TTL_DEFAULT_MS: '5000' })).toThrow(
      /SHARDSTOCK_ORDER_COMMIT_MARGIN_MS.*\(7000\).*\(5000: SHARDSTOCK_HOLD_TTL_MAX_MS/,
    );
    expect(() => loadConfig({ SHARDSTOCK_IDEMPOTENCY_WINDOW_S: '10' })).toThrow(/must fit in the longest hold \(5000/);
    expect(() => loadConfig({ SHARDSTOCK_HOLD_TTL_MAX_MS: '7000', SHARDSTOCK_HOLD_TTL_DEFAULT_MS: '5000' })).not.toThrow();
    expect(() => loadConfig({})).not.toThrow();
  });
});

describe('an order retried once its idempotency window has passed', () => {
  it('while its items are still recorded: a compensated order answers COMPENSATED (replayed), a released one RELEASED (replayed), and nothing is taken', async () => {
    const x = uniqueId('owx');
    const y = uniqueId('owy');
    await a.client.createCoupon({ couponId: x, totalStock: 10n, shardCount: 2 });
    await a.client.createCoupon({ couponId: y, totalStock: 10n, shardCount: 2 });
    const items = [
      { couponId: x, quantity: 2n },
      { couponId: y, quantity: 3n },
    ];
    const deducted = uniqueId('owd');
    expect((await a.client.deductOrder({ requestId: deducted, userId: 'u1', items })).outcome).toBe(OrderOutcome.DEDUCTED);
    await a.client.compensate({ couponId: '', requestId: '', orderId: deducted, reason: 'refund' });
    const reserved = uniqueId('owr');
    expect((await a.client.reserveOrder({ requestId: reserved, userId: 'u1', items })).outcome).toBe(OrderOutcome.RESERVED);
    await a.client.release({ target: { case: 'orderId', value: reserved }, reason: 'changed my mind' });

    await sleep(WINDOW_S * 1000 + 1500);
    const d = await a.client.deductOrder({ requestId: deducted, userId: 'u1', items });
    const r = await a.client.reserveOrder({ requestId: reserved, userId: 'u1', items });
    expect([d.outcome, d.replayed, r.outcome, r.replayed]).toEqual([OrderOutcome.COMPENSATED, true, OrderOutcome.RELEASED, true]);

    for (const c of [x, y]) {
      expect((await a.client.getStock({ couponId: c })).level?.available).toBe(10n);
      await settled(a.client, c);
      const ledger = await ledgerFigures(a.app, c);
      expect([ledger.deductRows, ledger.compensateRows, ledger.remaining, ledger.duplicates]).toEqual([1, 1, 10, 0]);
    }
  });
});
