// The audit API on the real stack with settlement running: GetDeduction's answer across Redis, in flight and
// MySQL matches what the clients were told, including after a Compensate and for oversold anomalies made
// behind the service's back; ListLedger and ListAnomalies page through every row exactly once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { CompensateOutcome, DeductionState, DeductOutcome, LedgerKind } from '../src/gen/inventory/v1/inventory_pb.js';
import { mayCall } from '../src/access/policy.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { settled, waitFor } from './support/settlement.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle,sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '500' });
});
afterAll(async () => {
  await t?.close();
});

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => ({ code: status.OK, details: '' }),
    (e: ServiceError) => ({ code: e.code, details: e.details }),
  );

describe('GetDeduction', () => {
  it('when a deduction is made, compensated and settled, then each stage shows in Redis, in flight and the ledger with the quantities the client was told', async () => {
    const id = uniqueId('aud');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const d1 = await t.client.deduct({ couponId: id, requestId: 'r1', userId: 'u1', quantity: 2n });
    const d2 = await t.client.deduct({ couponId: id, requestId: 'r2', userId: 'u2', quantity: 1n });
    expect([d1.outcome, d2.outcome]).toEqual([DeductOutcome.DEDUCTED, DeductOutcome.DEDUCTED]);

    const early = await t.client.getDeduction({ couponId: id, requestId: 'r1' });
    expect(early.state).toBe(DeductionState.DEDUCTED);
    expect(early.redis).toMatchObject({
      shard: d1.shard,
      userId: 'u1',
      quantity: 2n,
      remaining: d1.remaining,
      compensated: false,
      refused: false,
    });
    expect(early.redis?.deductedAt).toBeDefined();
    // Either still travelling or already settled: never lost between the two.
    expect(early.inFlight.length + early.ledger.length).toBeGreaterThan(0);

    expect((await t.client.compensate({ couponId: id, requestId: 'r2', reason: 'refund' })).outcome).toBe(CompensateOutcome.COMPENSATED);
    await settled(t.client, id);

    const r1 = await t.client.getDeduction({ couponId: id, requestId: 'r1' });
    expect(r1).toMatchObject({ state: DeductionState.DEDUCTED, settled: true, inFlight: [] });
    expect(r1.ledger.map((l) => [l.kind, l.quantity, l.userId, l.shard])).toEqual([[LedgerKind.DEDUCT, 2n, 'u1', d1.shard]]);

    const r2 = await t.client.getDeduction({ couponId: id, requestId: 'r2' });
    expect(r2.state).toBe(DeductionState.COMPENSATED);
    expect(r2.redis?.compensated).toBe(true);
    expect(r2.ledger.map((l) => [l.kind, l.quantity, l.reason])).toEqual([
      [LedgerKind.DEDUCT, 1n, ''],
      [LedgerKind.COMPENSATE, 1n, 'refund'],
    ]);

    // A coupon with a per-user limit keeps the record on the user's shard: found through the request's claim.
    const limited = uniqueId('lim');
    await t.client.createCoupon({ couponId: limited, totalStock: 20n, shardCount: 4, perUserLimit: 3 });
    const dl = await t.client.deduct({ couponId: limited, requestId: 'l1', userId: 'carol', quantity: 2n });
    const vl = await t.client.getDeduction({ couponId: limited, requestId: 'l1' });
    expect(vl.state).toBe(DeductionState.DEDUCTED);
    expect(vl.redis).toMatchObject({ shard: dl.shard, userId: 'carol', quantity: 2n });

    const none = await t.client.getDeduction({ couponId: id, requestId: 'never' });
    expect(none).toMatchObject({ state: DeductionState.NONE, settled: false, inFlight: [], ledger: [], anomalies: [] });
    expect(none.redis).toBeUndefined();
  });

  it('when MySQL refuses deductions as oversold, then GetDeduction says refused for exactly those and deducted for the others, and ListAnomalies pages through them', async () => {
    const id = uniqueId('anom');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    // MySQL believes only 2 units are left (written behind the service's back).
    await t.app.orm.em.fork().execute('update coupon set settled_remaining = 2 where id = ?', [id]);
    const rids = ['x-1', 'x-2', 'x-3', 'x-4', 'x-5'];
    for (const rid of rids) expect((await t.client.deduct({ couponId: id, requestId: rid })).outcome).toBe(DeductOutcome.DEDUCTED);

    const views = await waitFor(
      'three refusals',
      () => Promise.all(rids.map((requestId) => t.client.getDeduction({ couponId: id, requestId }))),
      (vs) => vs.filter((v) => v.state === DeductionState.REFUSED).length === 3 && vs.every((v) => v.inFlight.length === 0),
    );
    const refused = views.filter((v) => v.state === DeductionState.REFUSED);
    const kept = views.filter((v) => v.state === DeductionState.DEDUCTED);
    expect(kept).toHaveLength(2);
    for (const v of kept) expect(v).toMatchObject({ settled: true, anomalies: [] });
    for (const v of refused) {
      expect(v.settled).toBe(false);
      expect(v.anomalies.map((a) => [a.kind, a.reason, a.quantity])).toEqual([[LedgerKind.DEDUCT, 'insufficient_settled_remaining', 1n]]);
    }

    // A Compensate of a refused deduction closes it without putting units back: still refused.
    const victim = refused[0]!.requestId;
    await t.client.compensate({ couponId: id, requestId: victim });
    expect((await t.client.getDeduction({ couponId: id, requestId: victim })).state).toBe(DeductionState.REFUSED);

    const seen: string[] = [];
    let pageToken = '';
    let pages = 0;
    do {
      const page = await t.client.listAnomalies({ couponId: id, pageSize: 2, pageToken });
      expect(page.anomalies.length).toBeLessThanOrEqual(2);
      seen.push(...page.anomalies.filter((a) => a.kind === LedgerKind.DEDUCT).map((a) => a.requestId));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken);
    expect(seen.sort()).toEqual(refused.map((v) => v.requestId).sort());
    expect(pages).toBeGreaterThanOrEqual(2);
    // Without a coupon: every coupon's anomalies, these among them. The database is shared with every earlier
    // run on this machine, so they may be on any page: all pages are read.
    const ours: string[] = [];
    let token = '';
    do {
      const page = await t.client.listAnomalies({ pageSize: 1000, pageToken: token });
      ours.push(...page.anomalies.filter((a) => a.couponId === id && a.kind === LedgerKind.DEDUCT).map((a) => a.requestId));
      token = page.nextPageToken;
    } while (token);
    expect(ours.sort()).toEqual(refused.map((v) => v.requestId).sort());
  });
});

describe('ListLedger', () => {
  it('when a coupon has deductions, a compensation and sale changes, then pages of one row walk every row once and the filters keep exactly their rows', async () => {
    const id = uniqueId('led');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1 });
    await t.client.deduct({ couponId: id, requestId: 'a', userId: 'alice', quantity: 3n });
    await t.client.deduct({ couponId: id, requestId: 'b', userId: 'bob' });
    await t.client.compensate({ couponId: id, requestId: 'b' });
    await t.client.pauseSale({ couponId: id, reason: 'audit test' });
    await t.client.resumeSale({ couponId: id });
    await settled(t.client, id);

    const ids: bigint[] = [];
    const kinds: LedgerKind[] = [];
    let pageToken = '';
    do {
      const page = await t.client.listLedger({ couponId: id, pageSize: 1, pageToken });
      ids.push(...page.entries.map((e) => e.id));
      kinds.push(...page.entries.map((e) => e.kind));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort((x, y) => (x < y ? -1 : 1))).toEqual(ids);
    expect([...kinds].sort()).toEqual(
      [LedgerKind.DEDUCT, LedgerKind.DEDUCT, LedgerKind.COMPENSATE, LedgerKind.SALE_PAUSE, LedgerKind.SALE_RESUME].sort(),
    );

    const comp = await t.client.listLedger({ couponId: id, kinds: [LedgerKind.COMPENSATE] });
    expect(comp.entries.map((e) => [e.requestId, e.quantity])).toEqual([['b', 1n]]);
    const alice = await t.client.listLedger({ couponId: id, userId: 'alice' });
    expect(alice.entries.map((e) => [e.requestId, e.kind, e.quantity])).toEqual([['a', LedgerKind.DEDUCT, 3n]]);
    const before = await t.client.listLedger({ couponId: id, until: timestampFromMs(Date.now() - 3_600_000) });
    expect(before.entries).toEqual([]);
    const since = await t.client.listLedger({ couponId: id, since: timestampFromMs(Date.now() - 3_600_000) });
    expect(since.entries).toHaveLength(5);
  });

  it('when a page token, page size or time range is bad, then INVALID_ARGUMENT names the field; the API is admin-only', async () => {
    const id = uniqueId('bad');
    await t.client.createCoupon({ couponId: id, totalStock: 1n });
    expect(await refusal(t.client.listLedger({ couponId: id, pageToken: 'not-a-token' }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^page_token: /),
    });
    expect(await refusal(t.client.listAnomalies({ pageSize: 5000 }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^page_size: /),
    });
    expect(await refusal(t.client.listLedger({ couponId: id, since: timestampFromMs(2000), until: timestampFromMs(1000) }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^until: /),
    });
    expect(await refusal(t.client.getDeduction({ couponId: uniqueId('none'), requestId: 'x' }))).toMatchObject({ code: status.NOT_FOUND });
    for (const m of ['GetDeduction', 'ListLedger', 'ListAnomalies', 'PauseSale', 'ResumeSale', 'SetSaleWindow']) {
      expect(mayCall('deduct', m), m).toBe(false);
      expect(mayCall('admin', m), m).toBe(true);
    }
  });
});
