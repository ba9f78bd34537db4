// Compensate on an order answers COMPENSATED only once every item's units are back: an item whose deduction
// cannot be found (its record lost) leaves the order confirmed and the call refused, and a retry once the record
// is back finishes the order without giving any item back twice. An order whose own record is lost answers
// NOT_FOUND, and a retry of its DeductOrder brings the record back.
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderItemRequestId } from '../src/domain/ids.js';
import { homeShard } from '../src/domain/routing.js';
import { CompensateOutcome, OrderOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { orderKey, recordField } from '../src/redis/keys.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled } from './support/settlement.js';
import { rejection } from './support/rejection.js';
import { loseShard } from './support/shard-loss.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'order-compensate' });
});
afterAll(async () => {
  await a?.close();
});

/** Takes one request's record out of its shard's record hashes; returns where it was, to put it back. */
async function takeRecord(tag: string, requestId: string): Promise<{ key: string; value: Buffer } | null> {
  const field = recordField(requestId);
  for (const node of a.app.redis.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${a.namespace}:{${tag}}:rq:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const value = await a.app.redis.hgetBuffer(key, field);
        if (value) {
          await a.app.redis.hdel(key, field);
          return { key, value };
        }
      }
    } while (cursor !== '0');
  }
  return null;
}

/** Two coupons of 10 units and an order of 2 + 3 of them, deducted; `levels`: both coupons' available units. */
async function twoItemOrder(prefix: string) {
  const x = uniqueId(`${prefix}x`);
  const y = uniqueId(`${prefix}y`);
  await a.client.createCoupon({ couponId: x, totalStock: 10n, shardCount: 2 });
  await a.client.createCoupon({ couponId: y, totalStock: 10n, shardCount: 2 });
  const orderId = uniqueId(prefix);
  const order = {
    requestId: orderId,
    items: [
      { couponId: x, quantity: 2n },
      { couponId: y, quantity: 3n },
    ],
  };
  expect((await a.client.deductOrder(order)).outcome).toBe(OrderOutcome.DEDUCTED);
  const levels = () => Promise.all([x, y].map(async (c) => (await a.client.getStock({ couponId: c })).level?.available));
  /** The order retried (answered DEDUCTED, nothing taken twice), then compensated whole (both items back). */
  const retryThenCompensate = async () => {
    expect((await a.client.deductOrder(order)).outcome).toBe(OrderOutcome.DEDUCTED);
    expect(await levels()).toEqual([8n, 7n]);
    const comp = await a.client.compensate({ couponId: '', requestId: '', orderId, reason: 'refund' });
    expect(comp.outcome).toBe(CompensateOutcome.COMPENSATED);
    expect(await levels()).toEqual([10n, 10n]);
  };
  return { x, y, orderId, levels, retryThenCompensate };
}

describe('Compensate on an order', () => {
  it('an item without its deduction keeps the order confirmed and the answer is not COMPENSATED; the retry finishes it', async () => {
    const x = uniqueId('ocx');
    const y = uniqueId('ocy');
    await a.client.createCoupon({ couponId: x, totalStock: 10n, shardCount: 2 });
    await a.client.createCoupon({ couponId: y, totalStock: 10n, shardCount: 2 });
    const orderId = uniqueId('ord');
    const d = await a.client.deductOrder({
      requestId: orderId,
      userId: 'u1',
      items: [
        { couponId: x, quantity: 2n },
        { couponId: y, quantity: 3n },
      ],
    });
    expect(d.outcome).toBe(OrderOutcome.DEDUCTED);

    const cx = (await a.app.repo.find(x))!;
    const rid = orderItemRequestId(orderId, 0);
    const taken = await takeRecord(cx.shardTags[homeShard(cx, rid, '')]!, rid);
    expect(taken).not.toBeNull();

    const refused = await rejection(a.client.compensate({ couponId: '', requestId: '', orderId, reason: 'refund' }));
    expect(refused?.code).toBe(status.FAILED_PRECONDITION);
    // The other item was given back; the order is still confirmed, so it can be compensated once repaired.
    expect((await a.client.getStock({ couponId: y })).level?.available).toBe(10n);
    await a.app.redis.hset(taken!.key, recordField(rid), taken!.value);

    const comp = await a.client.compensate({ couponId: '', requestId: '', orderId, reason: 'refund' });
    expect([comp.outcome, comp.items.map((i) => i.compensateOutcome)]).toEqual([
      CompensateOutcome.COMPENSATED,
      [CompensateOutcome.COMPENSATED, CompensateOutcome.ALREADY_COMPENSATED],
    ]);
    const again = await a.client.compensate({ couponId: '', requestId: '', orderId, reason: 'refund' });
    expect(again.outcome).toBe(CompensateOutcome.ALREADY_COMPENSATED);

    for (const c of [x, y]) {
      await settled(a.client, c);
      const ledger = await ledgerFigures(a.app, c);
      expect([ledger.deductRows, ledger.compensateRows, ledger.remaining, ledger.duplicates]).toEqual([1, 1, 10, 0]);
    }
  });

  it('when the order record is lost with Redis, then Compensate answers NOT_FOUND (not NOT_DEDUCTED); a retry of the DeductOrder restores it without taking twice, and Compensate then gives every item back', async () => {
    const { x, y, orderId, levels, retryThenCompensate } = await twoItemOrder('ordl');
    // The record gone, as with its master and replicas; the items' deductions are untouched.
    expect(await a.app.redis.del(orderKey(a.namespace, orderId))).toBe(1);

    const lost = await a.client.compensate({ couponId: '', requestId: '', orderId, reason: 'refund' });
    expect([lost.outcome, lost.items.length]).toEqual([CompensateOutcome.NOT_FOUND, 0]);
    const never = await a.client.compensate({ couponId: '', requestId: '', orderId: uniqueId('never'), reason: 'refund' });
    expect(never.outcome).toBe(CompensateOutcome.NOT_FOUND);
    expect(await levels()).toEqual([8n, 7n]);

    await retryThenCompensate();
    for (const c of [x, y]) {
      await settled(a.client, c);
      const ledger = await ledgerFigures(a.app, c);
      expect([ledger.deductRows, ledger.compensateRows, ledger.remaining, ledger.duplicates]).toEqual([1, 1, 10, 0]);
    }
  });

  it('when the order record and every shard of its coupons are lost after settlement, then the rebuilt item records are still confirmed holds, so a retry of the DeductOrder follows the commit instead of being refused', async () => {
    const { x, y, orderId, levels, retryThenCompensate } = await twoItemOrder('ordr');
    for (const c of [x, y]) await settled(a.client, c);
    // A flushed master and its replicas, for every key involved: the order record, and each coupon's shards
    // (hashes, holds sets and record hashes), rebuilt from the ledger by a repair.
    await a.app.redis.del(orderKey(a.namespace, orderId));
    for (const c of [x, y]) {
      const coupon = (await a.app.repo.find(c))!;
      for (const index of [0, 1]) await loseShard(a.app, coupon, index);
      const rec = await a.client.reconcile({ couponId: c, repair: true });
      expect([rec.repair!.rebuiltShards.length, rec.consistent]).toEqual([2, true]);
    }
    expect(await levels()).toEqual([8n, 7n]);

    await retryThenCompensate();
  });
});
