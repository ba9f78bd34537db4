// A deduction settlement refused (MySQL could not cover it) keeps its request record in Redis, marked refused,
// and its units in the buyer's count. When the shard holding them is lost later, the recovery must put both back
// from the anomaly rows: otherwise a retry of the request deducts a second time (replayed=false, a unit leaves
// Redis that MySQL never sees leave), a Compensate answers NOT_DEDUCTED, and the buyer may buy past the limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, waitFor } from './support/settlement.js';
import { loseShard, shardState } from './support/inspect.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await a?.close();
});

const deduct = (couponId: string, requestId: string, userId: string, quantity = 1) =>
  a.client.deduct({ couponId, requestId, userId, quantity: BigInt(quantity) });

async function drained(couponId: string) {
  return waitFor(
    'the outbox and the stream to drain',
    () => a.client.reconcile({ couponId }),
    (x) => x.jetstreamPending === 0n && x.outboxEvents === 0n,
    20_000,
  );
}

describe('a refused deduction on a shard lost later', () => {
  it("when the shard holding refused deductions is lost and rebuilt, then a retry replays, a Compensate answers as before and gives nothing back, and the buyer's limit still counts them", async () => {
    const t0 = Date.now();
    const T = (what: string) => process.env.TEST_TRACE && console.log(`${Date.now() - t0} ms ${what}`);
    const id = uniqueId('rr');
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1, perUserLimit: 2 });
    // MySQL believes 1 unit is left (written behind the service's back): of three sales, two are refused.
    await a.app.orm.em.fork().execute('update coupon set settled_remaining = 1 where id = ?', [id]);
    expect((await deduct(id, 'r1', 'u1')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await deduct(id, 'r2', 'u2')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await deduct(id, 'r3', 'u2')).outcome).toBe(DeductOutcome.DEDUCTED);
    T('deducted');
    const f = await waitFor(
      'two refusals',
      () => ledgerFigures(a.app, id),
      (x) => x.anomalies.length === 2,
      20_000,
    );
    expect(f.deductRows).toBe(1);
    T('refused');
    await waitFor(
      'the repair down to the bound',
      () => shardState(a.app, id),
      (s) => s.available === 0,
      20_000,
    );
    T('repaired');
    // r3 is compensated: nothing goes back on sale, and u2 now holds one unit (r2).
    expect((await a.client.compensate({ couponId: id, requestId: 'r3', reason: 'cancel' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    await a.client.restock({ couponId: id, quantity: 5n, requestId: 'more' });
    await waitFor(
      'the compensation of the refused deduction to settle',
      () => ledgerFigures(a.app, id),
      (x) => x.anomalies.length === 3,
      20_000,
    );
    T('compensation settled');
    await drained(id);
    const before = await shardState(a.app, id);
    expect(before.available).toBe(5);

    T('drained');
    const coupon = (await a.app.repo.find(id))!;
    await loseShard(a.app, coupon, 0);
    // A new buyer's Deduct finds the shard missing: the recovery rebuilds it from MySQL (5 left).
    expect((await deduct(id, 'r9', 'u9')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await shardState(a.app, id)).available).toBe(4);

    T('recovered');
    // The refused deduction replays; nothing more leaves the shard.
    expect(await deduct(id, 'r2', 'u2')).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });
    // The compensated one is still compensated.
    expect((await a.client.compensate({ couponId: id, requestId: 'r3', reason: 'cancel' })).outcome).toBe(
      CompensateOutcome.ALREADY_COMPENSATED,
    );
    expect((await shardState(a.app, id)).available).toBe(4);
    // u2 holds r2's unit: of a limit of 2, one more, not two.
    expect((await deduct(id, 'u2-two', 'u2', 2)).outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    expect((await deduct(id, 'u2-one', 'u2')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await deduct(id, 'u2-more', 'u2')).outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    // Compensating r2 frees u2's unit but puts nothing on sale: MySQL never had it.
    const net = (await shardState(a.app, id)).net;
    expect((await a.client.compensate({ couponId: id, requestId: 'r2', reason: 'cancel' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    const after = await shardState(a.app, id);
    expect(after.available).toBe(3);
    expect(after.net).toBe(net - 1);
    expect((await deduct(id, 'u2-again', 'u2')).outcome).toBe(DeductOutcome.DEDUCTED);

    T('checked');
    const rec = await drained(id);
    expect(rec).toMatchObject({ settledRemaining: 2n, redisAvailable: 2n, redisDrift: 0n, anomalies: 4n, anomalyUnits: 2n });
    const end = await ledgerFigures(a.app, id);
    expect(end.deductRows).toBe(4);
    expect(end.duplicates).toBe(0);
  }, 120_000);
});
