// Claims of a limited coupon (routing.ts claimShard) through the loss of the shard that holds them: the
// recovery puts back the claims of open holds too, which have no event and no ledger row yet. Without them a
// hold's request id could be taken by another user, whose deduction would then collide with the hold's in the
// ledger (deduped on coupon, request, kind) while Redis counted both.
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimShard, homeShard, shardRef } from '../src/domain/routing.js';
import { recordField } from '../src/redis/keys.js';
import { CompensateOutcome, ConfirmOutcome, DeductOutcome, ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled } from './support/settlement.js';
import { rejection } from './support/rejection.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_INSTANCE_ID: 'claim-recovery' });
});
afterAll(async () => {
  await a?.close();
});

/** Every key of one shard, as a master lost with its replica would take them. */
async function dropShard(tag: string): Promise<number> {
  let n = 0;
  for (const node of a.app.redis.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${a.namespace}:{${tag}}:*`, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) n += await a.app.redis.del(k);
    } while (cursor !== '0');
  }
  return n;
}

describe('claims through a lost claim shard', () => {
  it("an open hold's claim is put back: its id stays its user's, and its Confirm can be compensated", async () => {
    const couponId = uniqueId('clrec');
    await a.client.createCoupon({ couponId, totalStock: 20n, shardCount: 4, perUserLimit: 5 });
    const coupon = (await a.app.repo.find(couponId))!;
    const home = homeShard(coupon, '', 'buyer-a');
    let rid = 'hold-0';
    for (let i = 1; claimShard(coupon, rid) === home; i++) rid = `hold-${i}`;
    const at = claimShard(coupon, rid);
    let other = 'buyer-b0';
    for (let i = 1; [home, at].includes(homeShard(coupon, '', other)); i++) other = `buyer-b${i}`;

    const h = await a.client.reserve({ couponId, requestId: rid, userId: 'buyer-a', quantity: 2n, ttlMs: 60_000 });
    expect(h.outcome).toBe(ReserveOutcome.HELD);
    expect(await dropShard(coupon.shardTags[at]!)).toBeGreaterThan(0);
    const rep = await a.client.reconcile({ couponId, repair: true });
    expect(rep.repair?.rebuiltShards).toEqual([at]);
    expect(await a.app.store.readClaim(shardRef(coupon, at), rid)).toBe('buyer-a|2');

    // Another user reusing the hold's id is refused, as before the loss.
    expect((await rejection(a.client.deduct({ couponId, requestId: rid, userId: other, quantity: 2n })))?.code).toBe(
      status.FAILED_PRECONDITION,
    );
    expect((await a.client.confirm({ target: { case: 'holdId', value: h.hold!.holdId } })).outcome).toBe(ConfirmOutcome.CONFIRMED);
    expect((await a.client.compensate({ couponId, requestId: rid, reason: 'refund' })).outcome).toBe(CompensateOutcome.COMPENSATED);

    const r = await settled(a.client, couponId);
    expect(r.consistent).toBe(true);
    const ledger = await ledgerFigures(a.app, couponId);
    expect([ledger.deductRows, ledger.compensateRows, ledger.remaining, ledger.duplicates]).toEqual([1, 1, 20, 0]);
    expect((await a.client.getStock({ couponId })).level?.available).toBe(20n);
  });
});

/** A claim gone as a lapsed one is: its Deduct's instance died before keeping it, and the hold ran out. */
async function dropClaim(couponTag: string, requestId: string): Promise<number> {
  let n = 0;
  for (const node of a.app.redis.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${a.namespace}:{${couponTag}}:cl:*`, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) n += await a.app.redis.hdel(k, recordField(requestId));
    } while (cursor !== '0');
  }
  return n;
}

describe('a lapsed claim', () => {
  it('Compensate still finds the deduction on its user shard, and keeps the claim for that user again', async () => {
    const couponId = uniqueId('cllapse');
    await a.client.createCoupon({ couponId, totalStock: 10n, shardCount: 4, perUserLimit: 1 });
    const coupon = (await a.app.repo.find(couponId))!;
    const rid = 'lapse-1';
    let other = 'buyer-b0';
    for (let i = 1; homeShard(coupon, '', other) === homeShard(coupon, '', 'buyer-a'); i++) other = `buyer-b${i}`;
    expect((await a.client.deduct({ couponId, requestId: rid, userId: 'buyer-a', quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    const at = shardRef(coupon, claimShard(coupon, rid));
    expect(await dropClaim(at.tag, rid)).toBe(1);
    expect(await a.app.store.readClaim(at, rid)).toBeNull();

    const c = await a.client.compensate({ couponId, requestId: rid, reason: 'in doubt' });
    expect(c.outcome).toBe(CompensateOutcome.COMPENSATED);
    expect(await a.app.store.readClaim(at, rid)).toBe('buyer-a|1');
    expect((await rejection(a.client.deduct({ couponId, requestId: rid, userId: other, quantity: 1n })))?.code).toBe(
      status.FAILED_PRECONDITION,
    );
    const again = await a.client.deduct({ couponId, requestId: rid, userId: 'buyer-a', quantity: 1n });
    expect([again.outcome, again.replayed, again.compensated]).toEqual([DeductOutcome.DEDUCTED, true, true]);
    // A request id never deducted still answers NOT_DEDUCTED after every shard was asked.
    expect((await a.client.compensate({ couponId, requestId: 'never-used', reason: 'x' })).outcome).toBe(CompensateOutcome.NOT_DEDUCTED);

    await settled(a.client, couponId);
    const ledger = await ledgerFigures(a.app, couponId);
    expect([ledger.deductRows, ledger.compensateRows, ledger.remaining, ledger.duplicates]).toEqual([1, 1, 10, 0]);
  });
});
