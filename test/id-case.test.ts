// Ids are case-sensitive everywhere: Redis keys, records and NATS subjects tell "R-1" from "r-1", so MySQL must
// too. Under the server's default collation (utf8mb4_general_ci) the ledger's unique key took a second
// request id differing only in case for a repeat of the first: a Restock was answered `replayed` and never
// added its units, a Deduct sold a unit in Redis that MySQL never counted, and a coupon id differing in case
// found the other coupon's row.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, TEST_DB_URL, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled } from './support/settlement.js';

let t: TestApp;
// A database of its own, migrated from empty as a new deployment's is (the shared test database may still
// have the old collation while other suites use it).
const db = `shardstock_case_${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  t = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_MYSQL_URL: TEST_DB_URL.replace(/\/[^/]*$/, `/${db}`) });
});
afterAll(async () => {
  await t?.app.orm.em.fork().execute(`drop database \`${db}\``);
  await t?.close();
});

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => status.OK,
    (e: ServiceError) => e.code,
  );

describe('ids differing only in case', () => {
  it('when two restocks have request ids differing only in case, then both add their units', async () => {
    const id = uniqueId('case-rs');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const first = await t.client.restock({ couponId: id, requestId: 'restock-a', quantity: 5n });
    const second = await t.client.restock({ couponId: id, requestId: 'RESTOCK-A', quantity: 7n });
    expect(first.replayed).toBe(false);
    expect(second.replayed).toBe(false);
    expect(second.level!.totalStock).toBe(22n);
    expect((await ledgerFigures(t.app, id)).total).toBe(22);
  });

  it('when two deducts have request ids differing only in case, then both are sold and both settle in the ledger', async () => {
    const id = uniqueId('case-dd');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1 });
    expect((await t.client.deduct({ couponId: id, requestId: 'order-x' })).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await t.client.deduct({ couponId: id, requestId: 'ORDER-X' })).outcome).toBe(DeductOutcome.DEDUCTED);
    await settled(t.client, id, 20_000).catch(() => undefined);
    const f = await ledgerFigures(t.app, id);
    expect(f.deductRows).toBe(2);
    expect(f.remaining).toBe(8);
    expect((await t.client.reconcile({ couponId: id })).consistent).toBe(true);
  }, 40_000);

  it('when a coupon id differs from an existing one only in case, then it is another coupon', async () => {
    const id = uniqueId('case-cp');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1 });
    const upper = id.toUpperCase();
    expect(await codeOf(t.client.getStock({ couponId: upper }))).toBe(status.NOT_FOUND);
    const created = await t.client.createCoupon({ couponId: upper, totalStock: 3n, shardCount: 1 });
    expect(created.created).toBe(true);
    expect((await t.client.getStock({ couponId: upper })).level!.totalStock).toBe(3n);
    expect((await t.client.getStock({ couponId: id })).level!.totalStock).toBe(10n);
  });
});
