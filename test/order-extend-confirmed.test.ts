// ExtendHold of an order one of whose items was confirmed by its hold id (behind the order's back). The order
// treated that item as expired: it answered EXPIRED and gave the confirmed units back, although nothing had
// expired (found in review). The item is taken, not lost: the rest is extended, and a Confirm of the order then
// commits it whole.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfirmOutcome, ExtendOutcome, OrderOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp();
});
afterAll(async () => {
  await a?.close();
});

async function level(couponId: string): Promise<[number, number, number]> {
  const l = (await a.client.getStock({ couponId })).level!;
  return [Number(l.available), Number(l.held), Number(l.deducted)];
}

describe('ExtendHold of an order with an item confirmed by its hold id', () => {
  it('extends the rest, keeps the confirmed item, and the order then confirms whole', async () => {
    const [x, y] = [uniqueId('oex'), uniqueId('oey')];
    for (const id of [x, y]) await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const orderId = uniqueId('oe');
    const held = await a.client.reserveOrder({
      requestId: orderId,
      items: [
        { couponId: x, quantity: 2n },
        { couponId: y, quantity: 3n },
      ],
      ttlMs: 5_000,
    });
    expect(held.outcome).toBe(OrderOutcome.RESERVED);
    expect((await a.client.confirm({ target: { case: 'holdId', value: held.items[0]!.hold!.holdId } })).outcome).toBe(
      ConfirmOutcome.CONFIRMED,
    );

    const ex = await a.client.extendHold({ target: { case: 'orderId', value: orderId }, ttlMs: 30_000 });
    expect(ExtendOutcome[ex.outcome]).toBe('EXTENDED');
    expect([await level(x), await level(y)]).toEqual([
      [8, 0, 2],
      [7, 3, 0],
    ]);
    const co = await a.client.confirm({ target: { case: 'orderId', value: orderId } });
    expect(ConfirmOutcome[co.outcome]).toBe('CONFIRMED');
    expect([await level(x), await level(y)]).toEqual([
      [8, 0, 2],
      [7, 0, 3],
    ]);
  });
});
