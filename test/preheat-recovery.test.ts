// A CreateCoupon that failed part-way through preheating leaves its row with preheated = 0 and some shards never
// made. The coupon still sells (a Deduct that finds a shard missing has the recovery make it). A shard lost after
// that must come back from MySQL's remaining minus what is in flight, with its request records, like any other
// lost shard: given its initial share instead, it would sell its sold units again and let a retried request
// deduct twice. Tried here both ways such a shard comes back: a Deduct that finds it missing, and a replayed
// CreateCoupon.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { loseShard, shardState } from './support/inspect.js';
import { ledgerFigures, settled } from './support/settlement.js';

const TOTAL = 20;
let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await a?.close();
});

/** A coupon of TOTAL units on 2 shards in the state a failed preheat leaves (row not preheated, shard 1 never
 * made), then 8 settled deductions; answers the coupon and the request ids deducted on each shard. */
async function soldAfterFailedPreheat() {
  const id = uniqueId('php');
  await a.client.createCoupon({ couponId: id, totalStock: BigInt(TOTAL), shardCount: 2 });
  await a.app.orm.em.fork().execute('update coupon set preheated = 0 where id = ?', [id]);
  const coupon = (await a.app.repo.find(id))!;
  expect(coupon.preheated).toBe(false);
  await loseShard(a.app, coupon, 1);

  const byShard: string[][] = [[], []];
  for (let i = 0; i < 8; i++) {
    const r = await a.client.deduct({ couponId: id, requestId: `p${i}`, userId: `u${i}`, quantity: 1n });
    expect(r.outcome).toBe(DeductOutcome.DEDUCTED);
    byShard[r.shard]!.push(`p${i}`);
  }
  await settled(a.client, id);
  expect((await ledgerFigures(a.app, id)).remaining).toBe(TOTAL - 8);
  // The shard to lose: the one that sold more (both sold: requests spread over both).
  const lost = byShard[0]!.length >= byShard[1]!.length ? 0 : 1;
  expect(byShard[lost]!.length).toBeGreaterThan(0);
  return { id, coupon, lost, soldThere: byShard[lost]! };
}

/** Sells what is left with new request ids; answers the first-time DEDUCTED count. */
async function sellOut(id: string): Promise<number> {
  let sold = 0;
  for (let i = 0; i < TOTAL + 5; i++) {
    const r = await a.client.deduct({ couponId: id, requestId: `n${i}`, userId: `n${i}`, quantity: 1n });
    if (r.outcome !== DeductOutcome.DEDUCTED) {
      expect(r.outcome).toBe(DeductOutcome.SOLD_OUT);
      break;
    }
    expect(r.replayed).toBe(false);
    sold++;
  }
  return sold;
}

async function expectExact(id: string, firstTime: number): Promise<void> {
  expect(firstTime).toBe(TOTAL);
  await settled(a.client, id);
  const f = await ledgerFigures(a.app, id);
  expect([f.deductRows, f.deductUnits, f.remaining, f.duplicates, f.anomalies.length]).toEqual([TOTAL, TOTAL, 0, 0, 0]);
}

describe('a coupon whose preheat failed, then lost a shard', () => {
  it('when a Deduct finds the lost shard missing, then it is rebuilt within the bound with its records: a retry replays and the coupon sells exactly its stock', async () => {
    const { id, coupon, lost, soldThere } = await soldAfterFailedPreheat();
    await loseShard(a.app, coupon, lost);

    const retry = await a.client.deduct({ couponId: id, requestId: soldThere[0]!, userId: `u${soldThere[0]!.slice(1)}`, quantity: 1n });
    expect([retry.outcome, retry.replayed]).toEqual([DeductOutcome.DEDUCTED, true]);
    const s = await shardState(a.app, id);
    expect(s.available + s.inTransit).toBe(TOTAL - 8);
    await expectExact(id, 8 + (await sellOut(id)));
  });

  it('when CreateCoupon is replayed after the loss, then it rebuilds the shard from MySQL, not with its initial share, and marks the coupon preheated', async () => {
    const { id, coupon, lost, soldThere } = await soldAfterFailedPreheat();
    await loseShard(a.app, coupon, lost);

    const again = await a.client.createCoupon({ couponId: id, totalStock: BigInt(TOTAL), shardCount: 2 });
    expect(again.created).toBe(false);
    expect((await a.app.repo.find(id))!.preheated).toBe(true);
    const s = await shardState(a.app, id);
    expect(s.available + s.inTransit).toBe(TOTAL - 8);
    const retry = await a.client.deduct({ couponId: id, requestId: soldThere[0]!, userId: `u${soldThere[0]!.slice(1)}`, quantity: 1n });
    expect([retry.outcome, retry.replayed]).toEqual([DeductOutcome.DEDUCTED, true]);
    await expectExact(id, 8 + (await sellOut(id)));
  });
});
