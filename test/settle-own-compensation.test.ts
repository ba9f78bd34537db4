// A deduction MySQL cannot cover is held while compensations of its coupon are in flight (one of them may make
// room). Its own compensation was one of them: the deduction waited for the compensation, and the compensation
// (whose deduction had not settled) waited for the deduction, until the hold's 5-minute cap refused the
// deduction as oversold although its buyer had given the units back (found in review; with
// SHARDSTOCK_SETTLE_BATCH=1 every such pair blocked). Now a held deduction takes its own compensation from the
// listing of what is in flight and the two settle together, leaving the remaining where it is.
import { afterAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, waitFor } from './support/settlement.js';

const apps: TestApp[] = [];
afterAll(async () => {
  for (const a of apps.reverse()) await a.close();
});

describe('a deduction MySQL cannot cover, with its own compensation in flight', () => {
  it('when every message settles alone (batch 1), then each pair settles within seconds, no anomaly, remaining unchanged', async () => {
    const namespace = uniqueId('soc');
    const front = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'soc-front' });
    apps.push(front);
    const couponId = uniqueId('soc');
    await front.client.createCoupon({ couponId, totalStock: 10n, shardCount: 1 });
    // Redis sold beyond the record: MySQL has nothing left to cover a deduction with.
    await front.app.orm.em.fork().execute('update coupon set settled_remaining = 0 where id = ?', [couponId]);
    for (let i = 0; i < 4; i++) {
      expect((await front.client.deduct({ couponId, requestId: `r${i}`, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
      expect((await front.client.compensate({ couponId, requestId: `r${i}`, reason: 'returned' })).outcome).toBe(
        CompensateOutcome.COMPENSATED,
      );
    }
    // The settler starts with all eight events in flight, and takes them one message at a time.
    const w = await startTestApp({
      SHARDSTOCK_NAMESPACE: namespace,
      SHARDSTOCK_INSTANCE_ID: 'soc-settle',
      SHARDSTOCK_WORKERS: 'relay,settle',
      SHARDSTOCK_SETTLE_BATCH: '1',
    });
    apps.push(w);
    const f = await waitFor(
      'the pairs settled',
      () => ledgerFigures(w.app, couponId),
      (x) => x.deductRows + x.anomalies.length >= 4 && x.compensateRows + x.anomalies.length >= 4,
      30_000,
    );
    expect({
      deducts: f.deductRows,
      compensates: f.compensateRows,
      anomalies: f.anomalies.length,
      remaining: f.remaining,
      duplicates: f.duplicates,
    }).toEqual({
      deducts: 4,
      compensates: 4,
      anomalies: 0,
      remaining: 0,
      duplicates: 0,
    });
    const r = await waitFor(
      'nothing left in flight',
      () => w.client.reconcile({ couponId }),
      (x) => x.jetstreamPending === 0n && x.outboxEvents === 0n,
      20_000,
    );
    expect(Number(r.inFlightNet)).toBe(0);
  });
});
