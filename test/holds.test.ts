// Holds on the real stack (#15): Reserve takes units out of available stock, Confirm turns them into a
// deduction settled to MySQL like one (a partial confirm gives the rest back at once), Release gives them back,
// ExtendHold moves the expiry; per-user limits count held units; GetStock and Reconcile show held units apart
// and stay exact with holds outstanding; bad input names the field.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import {
  CompensateOutcome,
  ConfirmOutcome,
  DeductOutcome,
  ExtendOutcome,
  HoldState,
  ReleaseOutcome,
  ReserveOutcome,
} from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled } from './support/settlement.js';
import { rejection } from './support/rejection.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'holds-a' });
  b = await startTestApp({ SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'holds-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

describe('holds', () => {
  it('when a hold is partly confirmed, then the kept units are a deduction with a ledger row and the rest are available at once', async () => {
    const id = uniqueId('hp');
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const r = await a.client.reserve({ couponId: id, requestId: 'r1', quantity: 5n, ttlMs: 60_000 });
    expect(r.outcome).toBe(ReserveOutcome.HELD);
    expect(r.hold?.state).toBe(HoldState.HELD);
    expect(r.hold!.expiresAt!.seconds).toBeGreaterThan(BigInt(Math.floor(Date.now() / 1000) + 30));
    let level = (await a.client.getStock({ couponId: id, includeShards: true })).level!;
    expect([level.available, level.held, level.deducted]).toEqual([5n, 5n, 0n]);
    expect(level.shards.reduce((s, x) => s + x.held, 0n)).toBe(5n);

    const c = await b.client.confirm({ target: { case: 'holdId', value: r.hold!.holdId }, quantity: 2n });
    expect([c.outcome, c.released, c.hold?.state, c.hold?.confirmed]).toEqual([ConfirmOutcome.CONFIRMED, 3n, HoldState.CONFIRMED, 2n]);
    // The 3 units not kept are available in the same step: the very next read sees them.
    level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.available, level.held, level.deducted]).toEqual([8n, 0n, 2n]);

    // Idempotent: again (either instance, with or without the quantity) answers CONFIRMED, giving nothing back
    // a second time; another quantity is refused.
    for (const t of [a, b]) {
      const again = await t.client.confirm({ target: { case: 'holdId', value: r.hold!.holdId } });
      expect([again.outcome, again.replayed, again.released, again.hold?.confirmed]).toEqual([ConfirmOutcome.CONFIRMED, true, 0n, 2n]);
    }
    expect((await rejection(a.client.confirm({ target: { case: 'holdId', value: r.hold!.holdId }, quantity: 3n })))?.code).toBe(
      status.FAILED_PRECONDITION,
    );
    // A confirmed hold is not released; it is a deduction: Compensate gives it back once.
    const rel = await a.client.release({ target: { case: 'holdId', value: r.hold!.holdId } });
    expect(rel.outcome).toBe(ReleaseOutcome.CONFIRMED);
    // Reserve replays answer the hold as it is now.
    const replay = await b.client.reserve({ couponId: id, requestId: 'r1', quantity: 5n, ttlMs: 60_000 });
    expect([replay.outcome, replay.replayed, replay.hold?.state]).toEqual([ReserveOutcome.HELD, true, HoldState.CONFIRMED]);

    const rec = await settled(a.client, id);
    expect([rec.consistent, rec.ledgerDeducted, rec.settledRemaining, rec.redisHeld]).toEqual([true, 2n, 8n, 0n]);
    const fig = await ledgerFigures(a.app, id);
    expect([fig.deductRows, fig.deductUnits, fig.duplicates]).toEqual([1, 2, 0]);

    const comp = await a.client.compensate({ couponId: id, requestId: 'r1' });
    expect(comp.outcome).toBe(CompensateOutcome.COMPENSATED);
    level = (await a.client.getStock({ couponId: id })).level!;
    expect([level.available, level.deducted]).toEqual([10n, 0n]);
  });

  it('when a user holds units of a limited coupon, then they count toward the limit until released, for Reserve and Deduct alike', async () => {
    const id = uniqueId('hl');
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 4, perUserLimit: 3 });
    const h1 = await a.client.reserve({ couponId: id, requestId: 'l1', userId: 'u1', quantity: 2n, ttlMs: 60_000 });
    expect(h1.outcome).toBe(ReserveOutcome.HELD);
    const over = await b.client.reserve({ couponId: id, requestId: 'l2', userId: 'u1', quantity: 2n, ttlMs: 60_000 });
    expect(over.outcome).toBe(ReserveOutcome.USER_LIMIT_EXCEEDED);
    const overDeduct = await b.client.deduct({ couponId: id, requestId: 'l3', userId: 'u1', quantity: 2n });
    expect(overDeduct.outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    const fits = await a.client.deduct({ couponId: id, requestId: 'l4', userId: 'u1', quantity: 1n });
    expect(fits.outcome).toBe(DeductOutcome.DEDUCTED);
    // Another user is not affected.
    expect((await a.client.reserve({ couponId: id, requestId: 'l5', userId: 'u2', quantity: 3n })).outcome).toBe(ReserveOutcome.HELD);

    // A partial confirm gives the unkept unit back to the user's allowance at once.
    const c = await a.client.confirm({ target: { case: 'holdId', value: h1.hold!.holdId }, quantity: 1n });
    expect([c.outcome, c.released]).toEqual([ConfirmOutcome.CONFIRMED, 1n]);
    expect((await a.client.reserve({ couponId: id, requestId: 'l6', userId: 'u1', quantity: 1n })).outcome).toBe(ReserveOutcome.HELD);
    expect((await a.client.reserve({ couponId: id, requestId: 'l7', userId: 'u1', quantity: 1n })).outcome).toBe(
      ReserveOutcome.USER_LIMIT_EXCEEDED,
    );
    // Released units leave the count.
    const l6 = await a.client.reserve({ couponId: id, requestId: 'l6', userId: 'u1', quantity: 1n });
    const rel = await b.client.release({ target: { case: 'holdId', value: l6.hold!.holdId } });
    expect([rel.outcome, rel.released]).toEqual([ReleaseOutcome.RELEASED, 1n]);
    expect((await b.client.release({ target: { case: 'holdId', value: l6.hold!.holdId } })).outcome).toBe(ReleaseOutcome.ALREADY_RELEASED);
    expect((await a.client.reserve({ couponId: id, requestId: 'l8', userId: 'u1', quantity: 1n })).outcome).toBe(ReserveOutcome.HELD);

    const level = (await a.client.getStock({ couponId: id })).level!;
    // Held: l5 (3) + l8 (1); deducted: l4 (1) + l1's kept unit (1).
    expect([level.held, level.deducted, level.available]).toEqual([4n, 2n, 94n]);
    const rec = await settled(a.client, id);
    expect([rec.consistent, rec.redisHeld, rec.redisDrift, rec.ledgerDeducted]).toEqual([true, 4n, 0n, 2n]);
  });

  it('when ExtendHold and Release meet a hold, then each answers what happened, and a request id is either a Deduct or a Reserve', async () => {
    const id = uniqueId('he');
    await a.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 1 });
    const h = await a.client.reserve({ couponId: id, requestId: 'e1', quantity: 1n, ttlMs: 2000 });
    const ext = await b.client.extendHold({ target: { case: 'holdId', value: h.hold!.holdId }, ttlMs: 120_000 });
    expect(ext.outcome).toBe(ExtendOutcome.EXTENDED);
    expect(ext.hold!.expiresAt!.seconds - h.hold!.expiresAt!.seconds).toBeGreaterThan(100n);
    const rel = await a.client.release({ target: { case: 'holdId', value: h.hold!.holdId }, reason: 'payment failed' });
    expect([rel.outcome, rel.released]).toEqual([ReleaseOutcome.RELEASED, 1n]);
    expect((await a.client.confirm({ target: { case: 'holdId', value: h.hold!.holdId } })).outcome).toBe(ConfirmOutcome.RELEASED);
    expect((await a.client.extendHold({ target: { case: 'holdId', value: h.hold!.holdId }, ttlMs: 5000 })).outcome).toBe(
      ExtendOutcome.RELEASED,
    );
    expect((await a.client.getStock({ couponId: id })).level!.available).toBe(5n);

    // One request id, one kind of request.
    expect((await a.client.deduct({ couponId: id, requestId: 'd1' })).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await rejection(a.client.reserve({ couponId: id, requestId: 'd1' })))?.code).toBe(status.FAILED_PRECONDITION);
    expect((await rejection(a.client.deduct({ couponId: id, requestId: 'e1' })))?.code).toBe(status.FAILED_PRECONDITION);
    // Still a Reserve's once confirmed (its record is then a deduction's), also on the sold-out fast path.
    const h2 = await a.client.reserve({ couponId: id, requestId: 'e2', quantity: 1n, ttlMs: 60_000 });
    expect((await a.client.confirm({ target: { case: 'holdId', value: h2.hold!.holdId } })).outcome).toBe(ConfirmOutcome.CONFIRMED);
    const reused = await rejection(a.client.deduct({ couponId: id, requestId: 'e2' }));
    expect([reused?.code, reused?.details]).toEqual([
      status.FAILED_PRECONDITION,
      'request_id e2 was already used by a Reserve; use a new request_id',
    ]);
    for (const rid of ['f1', 'f2', 'f3'])
      expect((await a.client.deduct({ couponId: id, requestId: rid })).outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await a.client.deduct({ couponId: id, requestId: 'f4' })).outcome).toBe(DeductOutcome.SOLD_OUT);
    const fast = a.app.deduct.stats.soldOutFastPath;
    expect((await rejection(a.client.deduct({ couponId: id, requestId: 'e2' })))?.code).toBe(status.FAILED_PRECONDITION);
    expect(a.app.deduct.stats.soldOutFastPath).toBe(fast + 1);
    // Across kinds the fast path refuses as the scripts do, never SOLD_OUT: an open hold's id, a Deduct's id.
    const open = await rejection(a.client.deduct({ couponId: id, requestId: 'e1' }));
    expect([open?.code, open?.details]).toEqual([
      status.FAILED_PRECONDITION,
      'request_id e1 was already used by a Reserve; use a new request_id',
    ]);
    const deducted = await rejection(a.client.reserve({ couponId: id, requestId: 'd1' }));
    expect([deducted?.code, deducted?.details]).toEqual([
      status.FAILED_PRECONDITION,
      'request_id d1 was already used by a Deduct; use a new request_id',
    ]);
    expect(a.app.deduct.stats.soldOutFastPath).toBe(fast + 3);
    // Compensate does not give back a hold that was never confirmed.
    expect((await a.client.compensate({ couponId: id, requestId: 'e1' })).outcome).toBe(CompensateOutcome.NOT_DEDUCTED);
    expect((await a.client.confirm({ target: { case: 'holdId', value: `${id}/0/never` } })).outcome).toBe(ConfirmOutcome.NOT_FOUND);
  });

  it('when the input is bad, then the status is INVALID_ARGUMENT naming the field', async () => {
    const id = uniqueId('hb');
    await a.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 1 });
    const cases: [Promise<unknown>, string][] = [
      [a.client.reserve({ couponId: id, requestId: 'x', ttlMs: 10 }), 'ttl_ms'],
      [a.client.reserve({ couponId: id, requestId: 'x', ttlMs: 999_999_999 }), 'ttl_ms'],
      [a.client.reserve({ couponId: id, requestId: 'x', quantity: 100_000n }), 'quantity'],
      [a.client.reserve({ couponId: id, requestId: '' }), 'request_id'],
      [a.client.reserve({ couponId: 'bad id', requestId: 'x' }), 'coupon_id'],
      [a.client.confirm({ target: { case: 'holdId', value: 'nonsense' } }), 'hold_id'],
      [a.client.confirm({ target: { case: 'holdId', value: `${id}/7/x` } }), 'hold_id'],
      [a.client.extendHold({ target: { case: 'holdId', value: `${id}/0/x` }, ttlMs: 1 }), 'ttl_ms'],
    ];
    for (const [p, field] of cases) {
      const e = await rejection(p);
      expect(e?.code, field).toBe(status.INVALID_ARGUMENT);
      expect(e?.details, field).toContain(field);
    }
    const h = await a.client.reserve({ couponId: id, requestId: 'q', quantity: 2n });
    const tooMany = await rejection(a.client.confirm({ target: { case: 'holdId', value: h.hold!.holdId }, quantity: 3n }));
    expect([tooMany?.code, tooMany?.details.includes('quantity')]).toEqual([status.INVALID_ARGUMENT, true]);
    // The default TTL applies when none is asked for.
    expect(Number(h.hold!.expiresAt!.seconds) * 1000 - Date.now()).toBeGreaterThan(a.app.config.holdTtlDefaultMs - 60_000);
  });
});
