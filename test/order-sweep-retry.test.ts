// The order sweeper gives an aborted order's items back; a step that fails (an UNAVAILABLE from a replica WAIT
// that timed out, a connection cut) must be tried again. releaseAll swallowed the failure and the sweeper
// dropped the order from its due-list all the same: an item confirmed by its hold id stayed deducted for good
// under an order recorded EXPIRED, and an abandoned order's hold stayed held until its own TTL (found in
// review). Now the failure reaches the sweeper, which looks at the order again a second later.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfirmOutcome, OrderOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import type { HoldKey } from '../src/domain/ports.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({
    SHARDSTOCK_HOLD_TTL_MIN_MS: '100',
    SHARDSTOCK_ORDER_SWEEP_MS: '200',
    SHARDSTOCK_HOLD_SWEEP_MS: '100',
    SHARDSTOCK_ORDER_ABANDON_MS: '1000',
  });
});
afterAll(async () => {
  await a?.close();
});

type HoldStep = (hold: HoldKey, ...rest: unknown[]) => Promise<unknown>;
/** The order service's hold steps, to make one fail once for one coupon. */
const orderHolds = () => (a.app.orders as unknown as { d: { holds: Record<string, HoldStep> } }).d.holds;

function failOnce(step: 'compensate' | 'release' | 'reserve', couponId: string, after = false): { failed: () => number } {
  const holds = orderHolds();
  const real = holds[step]!;
  let failed = 0;
  holds[step] = async (hold, ...rest) => {
    if (failed > 0 || hold.couponId !== couponId) return real.call(holds, hold, ...rest);
    failed++;
    // `after`: the step's write was made and the caller still fails (a caller that dies right after it).
    if (after) await real.call(holds, hold, ...rest);
    holds[step] = real;
    throw new Error(`${step} failed (injected)`);
  };
  return { failed: () => failed };
}

async function level(couponId: string): Promise<[number, number, number]> {
  const l = (await a.client.getStock({ couponId })).level!;
  return [Number(l.available), Number(l.held), Number(l.deducted)];
}

async function coupons(): Promise<[string, string]> {
  const ids: [string, string] = [uniqueId('osx'), uniqueId('osy')];
  for (const id of ids) await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
  return ids;
}

describe('an order sweep step that fails once', () => {
  it('when giving back an item confirmed by its hold id fails, the sweeper tries again and the order ends empty', async () => {
    const [x, y] = await coupons();
    const orderId = uniqueId('os1');
    const held = await a.client.reserveOrder({
      requestId: orderId,
      items: [
        { couponId: x, quantity: 2n },
        { couponId: y, quantity: 3n },
      ],
      ttlMs: 500,
    });
    expect(held.outcome).toBe(OrderOutcome.RESERVED);
    // Behind the order's back: item 0 confirmed by its hold id, so the expired order must give it back.
    const c = await a.client.confirm({ target: { case: 'holdId', value: held.items[0]!.hold!.holdId } });
    expect(c.outcome).toBe(ConfirmOutcome.CONFIRMED);
    const injected = failOnce('compensate', x);

    const back = await waitFor(
      'x given back',
      () => level(x),
      (l) => l[0] === 10 && l[2] === 0,
      10_000,
    );
    expect({ injected: injected.failed(), x: back, y: await level(y) }).toEqual({ injected: 1, x: [10, 0, 0], y: [10, 0, 0] });
    const replay = await a.client.confirm({ target: { case: 'orderId', value: orderId } });
    expect(ConfirmOutcome[replay.outcome]).toBe('EXPIRED');
  });

  it('when releasing an abandoned order’s hold fails, the sweeper tries again long before the hold expires', async () => {
    const [x, y] = await coupons();
    const orderId = uniqueId('os2');
    // The caller dies right after y's hold was taken: the order stays pending until the sweeper abandons it.
    const died = failOnce('reserve', y, true);
    const err = await a.client
      .deductOrder({
        requestId: orderId,
        items: [
          { couponId: x, quantity: 2n },
          { couponId: y, quantity: 3n },
        ],
        ttlMs: 60_000,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(died.failed()).toBe(1);
    expect([await level(x), await level(y)]).toEqual([
      [8, 2, 0],
      [7, 3, 0],
    ]);
    const injected = failOnce('release', y);

    // Abandoned after 1 s; the holds' own TTL is 60 s, so only the sweeper's second try gives y back this soon.
    const back = await waitFor(
      'y released',
      () => level(y),
      (l) => l[0] === 10,
      10_000,
    );
    expect({ injected: injected.failed(), x: await level(x), y: back }).toEqual({ injected: 1, x: [10, 0, 0], y: [10, 0, 0] });
  });
});
