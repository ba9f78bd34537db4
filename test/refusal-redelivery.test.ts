// A deduction settlement refused (MySQL could not cover it) is an anomaly once, however often its event is
// delivered again (a lost ack, a republish after JetStream's duplicate window). Every redelivery used to count
// it again and ask for another repair: refused 2 units, delivered 3 more times, reported 8 oversold units and
// 4 anomalies for 1 anomaly row (found in review). A redelivery now only finishes the Redis mark, which the
// first delivery may have failed to make.
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { encodeEvent, type SettlementEvent } from '../src/settlement/event.js';
import { settlementNames } from '../src/settlement/jetstream.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, refusalStore, sleep, waitFor } from './support/settlement.js';

let a: TestApp;
let nc: NatsConnection;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
  nc = await connect({ servers: 'nats://127.0.0.1:4222' });
});
afterAll(async () => {
  await nc?.close();
  await a?.close();
});

const settle = () => a.app.settlement.stats.settle;
const refusals = () => refusalStore(a.app);

/** A coupon whose MySQL remaining is 0 (Redis oversold it), and one deduction of 2 that settlement refuses. */
async function refusedDeduction(failFirstMark: boolean) {
  const couponId = uniqueId('rrd');
  await a.client.createCoupon({ couponId, totalStock: 10n, shardCount: 1 });
  await a.app.orm.em.fork().execute('update coupon set settled_remaining = 0 where id = ?', [couponId]);
  const before = { oversold: settle().oversoldUnits, refused: settle().refused, anomalies: settle().anomalies };
  let failed = 0;
  if (failFirstMark) {
    const store = refusals();
    const real = store.markRefused.bind(store);
    store.markRefused = async (...args) => {
      if (failed++ === 0) throw new Error('ReplicationTimeout (injected)');
      store.markRefused = real;
      return real(...args);
    };
  }
  expect((await a.client.deduct({ couponId, requestId: 'r1', quantity: 2n })).outcome).toBe(DeductOutcome.DEDUCTED);
  await waitFor(
    'the refusal marked in Redis',
    () => a.client.getDeduction({ couponId, requestId: 'r1' }),
    (d) => d.redis?.refused === true,
    30_000,
  );
  return { couponId, before, failed: () => failed };
}

async function deliverAgain(couponId: string, times: number) {
  const js = nc.jetstream();
  const e: SettlementEvent = {
    kind: 'D',
    couponId,
    requestId: 'r1',
    userId: '',
    quantity: 2,
    shard: 0,
    occurredAt: Date.now(),
    reason: '',
  };
  for (let k = 0; k < times; k++)
    await js.publish(settlementNames(a.namespace).subject(couponId), encodeEvent(e), { msgID: uniqueId('again') });
  await waitFor(
    'the redeliveries settled',
    () => a.client.reconcile({ couponId }),
    (r) => r.jetstreamPending === 0n,
    30_000,
  );
  await sleep(300);
}

describe('a refused deduction delivered again', () => {
  it('when its event comes 3 more times, then it is counted once: 2 oversold units, 1 refusal, 1 anomaly row', async () => {
    const { couponId, before } = await refusedDeduction(false);
    await deliverAgain(couponId, 3);
    const f = await ledgerFigures(a.app, couponId);
    expect({
      oversold: settle().oversoldUnits - before.oversold,
      refused: settle().refused - before.refused,
      anomalies: settle().anomalies - before.anomalies,
      anomalyRows: f.anomalies.length,
      deductRows: f.deductRows,
    }).toEqual({ oversold: 2, refused: 1, anomalies: 1, anomalyRows: 1, deductRows: 0 });
  });

  it('when the first delivery fails to mark it in Redis, then the next one marks it, still counted once', async () => {
    const { couponId, before, failed } = await refusedDeduction(true);
    expect(failed()).toBeGreaterThanOrEqual(2);
    const d = await a.client.getDeduction({ couponId, requestId: 'r1' });
    expect(d.redis?.refused).toBe(true);
    expect({ oversold: settle().oversoldUnits - before.oversold, refused: settle().refused - before.refused }).toEqual({
      oversold: 2,
      refused: 1,
    });
  });
});
