// Sale windows and the kill switch on the real stack: window edges judged by a clock the test controls, a pause
// on instance A refusing on instance B within the NATS hop, refusals that never reach Redis, Compensate while
// paused, each change audited as a ledger row and shown by GetStock and WatchStock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import {
  CompensateOutcome,
  ConfirmOutcome,
  DeductOutcome,
  ItemRefusalReason,
  OrderOutcome,
  ReserveOutcome,
  SaleStatus,
} from '../src/gen/inventory/v1/inventory_pb.js';
import { MikroCouponRepository } from '../src/db/coupon-repository.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

const namespace = `s${Date.now().toString(36)}`;
/** The clock instance A judges windows by. */
let clock = Date.UTC(2030, 0, 1, 10, 0, 0);
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'sale-a' }, { now: () => clock });
  b = await startTestApp({ SHARDSTOCK_NAMESPACE: namespace, SHARDSTOCK_INSTANCE_ID: 'sale-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

/** Redis operations instance `t` has made so far on a Deduct's path (every store call is timed; probes also
 * come from level reads for watchers and low-stock checks, so they are left out). */
async function redisOps(t: TestApp): Promise<number> {
  const text = await (await fetch(`${t.httpUrl}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^shardstock_redis_op_duration_seconds_count\{([^}]*)\} (\d+)/gm))
    if (!m[1]!.includes('"probe"')) n += Number(m[2]);
  return n;
}

async function ledgerRows(t: TestApp, couponId: string) {
  return t.app.orm.em
    .fork()
    .getConnection()
    .execute<{ kind: string; reason: string | null; quantity: number }[]>(
      'select kind, reason, quantity from stock_ledger where coupon_id = ? and kind like ? order by id',
      [couponId, 'SALE%'],
    );
}

const grpcCode = (p: Promise<unknown>) =>
  p.then(
    () => status.OK,
    (e: ServiceError) => e.code,
  );

describe('sale windows', () => {
  it('when the clock sits on either edge of the window, then deducts are refused before starts_at and from ends_at on, without touching Redis', async () => {
    const id = uniqueId('win');
    const start = clock + 60_000;
    const end = start + 10_000;
    const created = await a.client.createCoupon({
      couponId: id,
      totalStock: 10n,
      shardCount: 2,
      startsAt: timestampFromMs(start),
      endsAt: timestampFromMs(end),
    });
    expect(created.coupon?.sale?.status).toBe(SaleStatus.NOT_STARTED);

    const deduct = (n: number) => a.client.deduct({ couponId: id, requestId: `r${n}` });
    clock = start - 1;
    const before = await redisOps(a);
    expect((await deduct(1)).outcome).toBe(DeductOutcome.NOT_STARTED);
    expect(await redisOps(a)).toBe(before);

    clock = start;
    expect((await deduct(2)).outcome).toBe(DeductOutcome.DEDUCTED);
    clock = end - 1;
    expect((await deduct(3)).outcome).toBe(DeductOutcome.DEDUCTED);

    clock = end;
    const atEnd = await redisOps(a);
    expect((await deduct(4)).outcome).toBe(DeductOutcome.ENDED);
    // A replay of a deduction made in the window is refused too once the sale ended (no Redis read).
    expect((await deduct(3)).outcome).toBe(DeductOutcome.ENDED);
    expect(await redisOps(a)).toBe(atEnd);

    const level = (await a.client.getStock({ couponId: id })).level!;
    expect(level.deducted).toBe(2n);
    expect(level.sale?.status).toBe(SaleStatus.ENDED);

    // Compensate still works after the end.
    expect((await a.client.compensate({ couponId: id, requestId: 'r3' })).outcome).toBe(CompensateOutcome.COMPENSATED);

    // The window can be moved; the change is audited.
    await a.client.setSaleWindow({ couponId: id, startsAt: timestampFromMs(start), reason: 'extended' });
    expect((await deduct(5)).outcome).toBe(DeductOutcome.DEDUCTED);
    const rows = await ledgerRows(a, id);
    expect(rows.map((r) => r.kind)).toEqual(['SALE_WINDOW']);
    expect(rows[0]!.reason).toContain('extended');
    expect(Number(rows[0]!.quantity)).toBe(0);
  });

  it('when a window is invalid, then INVALID_ARGUMENT names the field', async () => {
    const id = uniqueId('bad');
    const e = await a.client
      .createCoupon({ couponId: id, totalStock: 1n, startsAt: timestampFromMs(clock + 10), endsAt: timestampFromMs(clock) })
      .catch((err: ServiceError) => err);
    expect((e as ServiceError).code).toBe(status.INVALID_ARGUMENT);
    expect((e as ServiceError).details).toMatch(/^ends_at: /);
    await a.client.createCoupon({ couponId: id, totalStock: 1n });
    const e2 = await a.client.setSaleWindow({ couponId: id, startsAt: { seconds: -5n, nanos: 0 } }).catch((err: ServiceError) => err);
    expect((e2 as ServiceError).details).toMatch(/^starts_at: /);
    expect(await grpcCode(a.client.pauseSale({ couponId: uniqueId('none') }))).toBe(status.NOT_FOUND);
  });
});

describe('the kill switch', () => {
  it('when a sale is paused on instance A, then instance B refuses within the NATS hop without touching Redis, Compensate still works, and a resume reopens it', async () => {
    const id = uniqueId('kill');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 4 });
    // Instance B has the coupon in its catalog before the pause.
    expect((await b.client.deduct({ couponId: id, requestId: 'before' })).outcome).toBe(DeductOutcome.DEDUCTED);

    const watch = b.client.watchStock({ couponId: id, minIntervalMs: 50 });
    const it = watch[Symbol.asyncIterator]();
    expect((await it.next()).value.level.sale.status).toBe(SaleStatus.OPEN);

    const paused = await a.client.pauseSale({ couponId: id, reason: 'bot traffic' });
    expect(paused.changed).toBe(true);
    expect(paused.sale?.status).toBe(SaleStatus.PAUSED);
    const pausedAt = Date.now();
    let answer: DeductOutcome;
    let n = 0;
    do answer = (await b.client.deduct({ couponId: id, requestId: `p${n++}` })).outcome;
    while (answer === DeductOutcome.DEDUCTED && Date.now() - pausedAt < 1000);
    expect(answer).toBe(DeductOutcome.SALE_PAUSED);
    // Well within the catalog's background re-read (5 s): the announcement carried it.
    expect(Date.now() - pausedAt).toBeLessThan(1000);
    const deductedBeforeRefusal = n - 1;

    const ops = await redisOps(b);
    for (let i = 0; i < 20; i++)
      expect((await b.client.deduct({ couponId: id, requestId: `q${i}` })).outcome).toBe(DeductOutcome.SALE_PAUSED);
    expect(await redisOps(b)).toBe(ops);

    // The watcher on B sees the pause.
    let seen = (await it.next()).value;
    while (seen.level.sale.status !== SaleStatus.PAUSED) seen = (await it.next()).value;
    await it.return?.();

    expect((await b.client.compensate({ couponId: id, requestId: 'before', reason: 'refund' })).outcome).toBe(
      CompensateOutcome.COMPENSATED,
    );
    expect((await a.client.pauseSale({ couponId: id })).changed).toBe(false);

    expect((await b.client.resumeSale({ couponId: id, reason: 'cleared' })).changed).toBe(true);
    const resumedAt = Date.now();
    do answer = (await a.client.deduct({ couponId: id, requestId: `r${n++}` })).outcome;
    while (answer === DeductOutcome.SALE_PAUSED && Date.now() - resumedAt < 1000);
    expect(answer).toBe(DeductOutcome.DEDUCTED);

    const level = (await b.client.getStock({ couponId: id })).level!;
    expect(level.sale?.status).toBe(SaleStatus.OPEN);
    expect(level.deducted).toBe(BigInt(deductedBeforeRefusal + 1));
    const rows = await ledgerRows(a, id);
    expect(rows.map((r) => `${r.kind}:${r.reason}`)).toEqual(['SALE_PAUSE:bot traffic', 'SALE_RESUME:cleared']);
  });

  it('when an announcement is lost (the pause written behind the service), then instances pick it up from MySQL within the re-read interval', async () => {
    const id = uniqueId('lost');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 1 });
    expect((await b.client.deduct({ couponId: id, requestId: 'l0' })).outcome).toBe(DeductOutcome.DEDUCTED);
    await b.app.orm.em.fork().execute('update coupon set sale_paused = 1, sale_revision = sale_revision + 1 where id = ?', [id]);
    const start = Date.now();
    let n = 1;
    let answer: DeductOutcome;
    do {
      answer = (await b.client.deduct({ couponId: id, requestId: `l${n++}` })).outcome;
      if (answer === DeductOutcome.DEDUCTED) await new Promise((r) => setTimeout(r, 200));
    } while (answer === DeductOutcome.DEDUCTED && Date.now() - start < 8000);
    expect(answer).toBe(DeductOutcome.SALE_PAUSED);
    // Re-read at most every 5 s, in the background of a Deduct.
    expect(Date.now() - start).toBeLessThan(6500);
  });
  it('when an announcement is lost and the coupon then sits idle past the re-read interval, then the next burst on that instance is refused, none sold', async () => {
    const id = uniqueId('idle');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 2 });
    expect((await b.client.deduct({ couponId: id, requestId: 'i0' })).outcome).toBe(DeductOutcome.DEDUCTED);
    // The pause instance B never hears of (NATS was down for it at that moment).
    await b.app.orm.em.fork().execute('update coupon set sale_paused = 1, sale_revision = sale_revision + 1 where id = ?', [id]);
    // Nobody buys on B for longer than the re-read interval (5 s): a pause this old must hold there.
    await new Promise((r) => setTimeout(r, 6500));
    const burst = await Promise.all(
      Array.from({ length: 20 }, (_, i) => b.client.deduct({ couponId: id, requestId: `i${i + 1}` }).then((r) => r.outcome)),
    );
    expect(burst.filter((o) => o === DeductOutcome.DEDUCTED)).toHaveLength(0);
    expect(burst.every((o) => o === DeductOutcome.SALE_PAUSED)).toBe(true);
    expect((await a.client.getStock({ couponId: id })).level!.deducted).toBe(1n);
  });
  it('when a sale is paused, then Reserve and orders are refused on both instances while holds taken before confirm', async () => {
    const id = uniqueId('hold-pause');
    await a.client.createCoupon({ couponId: id, totalStock: 20n, shardCount: 2 });
    const before = await b.client.reserve({ couponId: id, requestId: 'h-before', quantity: 2n, ttlMs: 60_000 });
    expect(before.outcome).toBe(ReserveOutcome.HELD);
    const order = await b.client.reserveOrder({
      requestId: 'o-before',
      userId: 'u1',
      items: [{ couponId: id, quantity: 1n }],
      ttlMs: 60_000,
    });
    expect(order.outcome).toBe(OrderOutcome.RESERVED);
    await a.client.pauseSale({ couponId: id, reason: 'holds test' });
    await new Promise((r) => setTimeout(r, 300));
    for (const t of [a, b]) {
      expect((await t.client.reserve({ couponId: id, requestId: `h-after-${t === a ? 'a' : 'b'}`, ttlMs: 60_000 })).outcome).toBe(
        ReserveOutcome.SALE_PAUSED,
      );
      const refused = await t.client.deductOrder({
        requestId: `o-after-${t === a ? 'a' : 'b'}`,
        userId: 'u1',
        items: [{ couponId: id, quantity: 1n }],
      });
      expect([refused.outcome, refused.refusal?.reason]).toEqual([OrderOutcome.REFUSED, ItemRefusalReason.SALE_PAUSED]);
    }
    expect((await a.client.confirm({ target: { case: 'holdId', value: before.hold!.holdId } })).outcome).toBe(ConfirmOutcome.CONFIRMED);
    expect((await a.client.confirm({ target: { case: 'orderId', value: 'o-before' } })).outcome).toBe(ConfirmOutcome.CONFIRMED);
    const level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.deducted, level.held]).toEqual([3n, 0n]);
  });

  it('when the background re-read fetches sale settings, then they equal what a full read of each row gives (window, pause, revision)', async () => {
    const open = uniqueId('rr-open');
    const shut = uniqueId('rr-shut');
    const start = Date.now() + 60_000;
    await a.client.createCoupon({ couponId: open, totalStock: 5n, shardCount: 1 });
    await a.client.createCoupon({
      couponId: shut,
      totalStock: 5n,
      shardCount: 1,
      startsAt: timestampFromMs(start),
      endsAt: timestampFromMs(start + 9_007_199_254),
    });
    await a.app.orm.em.fork().execute('update coupon set sale_paused = 1, sale_revision = sale_revision + 7 where id = ?', [shut]);
    const repo = new MikroCouponRepository(a.app.orm);
    const read = await repo.saleSettings([open, shut, uniqueId('rr-none')]);
    expect(read.size).toBe(2);
    for (const id of [open, shut]) expect(read.get(id)).toEqual((await repo.find(id))!.sale);
    expect(read.get(shut)).toEqual({ startsAt: start, endsAt: start + 9_007_199_254, paused: true, revision: expect.any(Number) });
    expect(read.get(shut)!.revision).toBeGreaterThanOrEqual(7);
    expect(read.get(open)).toEqual({ startsAt: null, endsAt: null, paused: false, revision: read.get(open)!.revision });
  });
});
