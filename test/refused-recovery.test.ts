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
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1, perUserLimit: 3 });
    // MySQL believes 1 unit is left (written behind the service's back): of three sales by one buyer, the one
    // settlement takes first is applied and the other two are refused (which ones depends on relay order).
    await a.app.orm.em.fork().execute('update coupon set settled_remaining = 1 where id = ?', [id]);
    for (const rid of ['r1', 'r2', 'r3']) expect((await deduct(id, rid, 'u')).outcome).toBe(DeductOutcome.DEDUCTED);
    T('deducted');
    const f = await waitFor(
      'two refusals',
      () => ledgerFigures(a.app, id),
      (x) => x.anomalies.length === 2,
      20_000,
    );
    expect(f.deductRows).toBe(1);
    const [kept, gone] = f.anomalies.map((n) => n.eventId.split(':').pop()!);
    T(`refused ${kept} and ${gone}`);
    await waitFor(
      'the repair down to the bound',
      () => shardState(a.app, id),
      (s) => s.available === 0,
      20_000,
    );
    T('repaired');
    // One refused deduction is compensated: nothing goes back on sale, and u now holds two units (the applied
    // one and the other refused one).
    expect((await a.client.compensate({ couponId: id, requestId: gone!, reason: 'cancel' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    await a.client.restock({ couponId: id, quantity: 5n, requestId: 'more' });
    await waitFor(
      'the compensation of the refused deduction to settle',
      () => ledgerFigures(a.app, id),
      (x) => x.anomalies.length === 3,
      20_000,
    );
    await drained(id);
    T('drained');
    expect((await shardState(a.app, id)).available).toBe(5);

    const coupon = (await a.app.repo.find(id))!;
    await loseShard(a.app, coupon, 0);
    // A new buyer's Deduct finds the shard missing: the recovery rebuilds it from MySQL (5 left).
    expect((await deduct(id, 'r9', 'u9')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await shardState(a.app, id)).available).toBe(4);
    T('recovered');

    // The refused deduction replays; nothing more leaves the shard.
    expect(await deduct(id, kept!, 'u')).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });
    // The compensated one is still compensated.
    expect((await a.client.compensate({ couponId: id, requestId: gone!, reason: 'cancel' })).outcome).toBe(
      CompensateOutcome.ALREADY_COMPENSATED,
    );
    expect((await shardState(a.app, id)).available).toBe(4);
    // u holds two units: of a limit of 3, one more, not two.
    expect((await deduct(id, 'u-two', 'u', 2)).outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    expect((await deduct(id, 'u-one', 'u')).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await deduct(id, 'u-more', 'u')).outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    // Compensating the refused one frees u's unit but puts nothing on sale: MySQL never had it.
    const net = (await shardState(a.app, id)).net;
    expect((await a.client.compensate({ couponId: id, requestId: kept!, reason: 'cancel' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    const after = await shardState(a.app, id);
    expect(after.available).toBe(3);
    expect(after.net).toBe(net - 1);
    expect((await deduct(id, 'u-again', 'u')).outcome).toBe(DeductOutcome.DEDUCTED);
    T('checked');

    // A Reconcile read while the last deduction settles can show a transient negative drift: wait for the books.
    const rec = await waitFor(
      'the books to agree',
      () => a.client.reconcile({ couponId: id }),
      (x) => x.jetstreamPending === 0n && x.outboxEvents === 0n && x.redisDrift === 0n && x.ledgerDeducted === 4n,
      20_000,
    );
    expect(rec).toMatchObject({ settledRemaining: 2n, redisAvailable: 2n, anomalies: 4n, anomalyUnits: 2n });
    const end = await ledgerFigures(a.app, id);
    expect(end.deductRows).toBe(4);
    expect(end.duplicates).toBe(0);
  }, 120_000);
});
