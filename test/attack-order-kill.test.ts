// An instance SIGKILLed in the middle of orders of five coupons (DeductOrders and ReserveOrders), each order then
// retried at once on the two surviving instances with the same order id, reserved ones confirmed or released:
// every order ends whole or empty, no item is deducted twice, and its answer is the same on every retry and
// says which, by the MySQL ledger once settled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderItemRequestId } from '../src/domain/ids.js';
import { OrderOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { uniqueId, type TestApp } from './support/harness.js';
import { closeInstances, FAST_ORDER_ENV, startOrderInstances } from './support/instance-pair.js';
import { spawnTs } from './support/processes.js';
import { ledgerFigures, settled, waitFor } from './support/settlement.js';
import { retryUnavailable } from './support/retry-unavailable.js';

const retryKill = <T>(call: () => Promise<T>) => retryUnavailable(call, 40, 80);
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  [a, b] = await startOrderInstances('okill', FAST_ORDER_ENV);
});
afterAll(() => closeInstances(a, b));

describe('attack: an instance killed mid-order, retried on the others', () => {
  it('when 300 orders of 5 coupons are cut by a SIGKILL and retried at once from two instances, then each is whole or empty, answered alike on every retry, and the ledger and Redis agree', async () => {
    const stocks = [700, 400, 400, 400, 150];
    const qty = [2, 1, 1, 1, 1];
    const ids = stocks.map((_, i) => uniqueId(`okill${i}`));
    await Promise.all(ids.map((couponId, i) => a.client.createCoupon({ couponId, totalStock: BigInt(stocks[i]!), shardCount: 4 })));
    const count = 300;
    const ttlMs = 4000;
    const prefix = uniqueId('okill');
    const orderId = (i: number) => `${prefix}-${i}`;
    const child = spawnTs(
      'test/support/order-child.ts',
      [
        JSON.stringify({
          namespace: a.namespace,
          prefix,
          count,
          ttlMs,
          env: FAST_ORDER_ENV,
          kinds: 'mixed',
          items: ids.map((couponId, k) => ({ couponId, quantity: qty[k] })),
        }),
      ],
      {},
    );
    await new Promise<void>((resolve, reject) => {
      let ticks = 0;
      child.stdout!.on('data', (d: Buffer) => {
        ticks += d
          .toString()
          .split('\n')
          .filter((l) => l.startsWith('tick')).length;
        if (ticks >= 3) resolve();
      });
      child.once('exit', (code) => reject(new Error(`order process exited early (${code})`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    const items = ids.map((couponId, k) => ({ couponId, quantity: BigInt(qty[k]!) }));
    const place = (t: TestApp, i: number): Promise<{ outcome: OrderOutcome }> =>
      retryKill<{ outcome: OrderOutcome }>(() =>
        i % 2 === 0
          ? t.client.deductOrder({ requestId: orderId(i), userId: `u${i}`, items, ttlMs })
          : t.client.reserveOrder({ requestId: orderId(i), userId: `u${i}`, items, ttlMs }),
      );
    // Each order retried at once from both instances; a reserved one is then confirmed (i % 4 == 1) or released.
    await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const [r1, r2] = await Promise.all([place(a, i), place(b, i)]);
        if (r1.outcome !== OrderOutcome.RESERVED && r2.outcome !== OrderOutcome.RESERVED) return;
        const t = i % 4 === 1 ? b : a;
        const id = orderId(i);
        await retryKill<unknown>(() =>
          i % 4 === 1
            ? t.client.confirm({ target: { case: 'orderId', value: id } })
            : t.client.release({ target: { case: 'orderId', value: id }, reason: 'no' }),
        );
      }),
    );
    await waitFor(
      'no units held',
      () => Promise.all(ids.map((c) => a.client.getStock({ couponId: c }))),
      (ls) => ls.every((l) => l.level?.held === 0n),
      20_000,
      100,
    );
    const finals = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const rs = [await place(a, i), await place(b, i), await place(a, i)];
        expect(new Set(rs.map((r) => r.outcome)).size, `order ${i}: ${rs.map((r) => OrderOutcome[r.outcome])}`).toBe(1);
        return rs[0]!.outcome;
      }),
    );
    const net = new Map<string, number>();
    for (const id of ids) {
      expect((await settled(a.client, id)).consistent, `coupon ${id}`).toBe(true);
      const rows = await a.app.orm.em
        .fork()
        .execute<{ request_id: string; kind: string }[]>('select request_id, kind from stock_ledger where coupon_id = ?', [id]);
      const seen = new Set<string>();
      for (const r of rows) {
        const k = `${r.kind}|${r.request_id}`;
        expect(seen.has(k), `${id} ${k} twice`).toBe(false);
        seen.add(k);
        net.set(`${id}|${r.request_id}`, (net.get(`${id}|${r.request_id}`) ?? 0) + (r.kind === 'DEDUCT' ? 1 : -1));
      }
    }
    let whole = 0;
    for (let i = 0; i < count; i++) {
      const its = ids.map((c, k) => net.get(`${c}|${orderItemRequestId(orderId(i), k)}`) ?? 0);
      const n = its.filter((x) => x === 1).length;
      expect(its.every((x) => x === 0 || x === 1) && (n === 0 || n === ids.length), `order ${i}: ${its.join(',')}`).toBe(true);
      expect(finals[i] === OrderOutcome.DEDUCTED, `order ${i}: ${OrderOutcome[finals[i]!]} vs ${its.join(',')}`).toBe(n === ids.length);
      if (n === ids.length) whole++;
    }
    expect(whole).toBeGreaterThan(0);
    for (const [k, id] of ids.entries()) {
      const f = await ledgerFigures(a.app, id);
      expect([f.remaining, f.duplicates], `coupon ${k}`).toEqual([stocks[k]! - whole * qty[k]!, 0]);
      const l = (await b.client.getStock({ couponId: id })).level!;
      expect([l.available, l.held, l.deducted], `coupon ${k}`).toEqual([BigInt(stocks[k]! - whole * qty[k]!), 0n, BigInt(whole * qty[k]!)]);
    }
  });
});
