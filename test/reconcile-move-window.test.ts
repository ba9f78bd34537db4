// Reconcile while a fallback move is between its credit and its acknowledgement: its units are in the target's
// avail and still in the source's transit. Counted in both, Redis looked above its bound (redisDrift +5) on a
// coupon where nothing was wrong, which the reconciler's read order promises never to happen.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moveCreditId } from '../src/domain/ids.js';
import { shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await a?.close();
});

describe('reconcile during a fallback move', () => {
  it('when a move has landed at its target and is not acknowledged yet, then Reconcile counts its units once', async () => {
    const id = uniqueId('rm');
    await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    const source = shardRef(coupon, 1);
    const target = shardRef(coupon, 0);
    const moveId = 'm-window-1';

    expect(await a.app.store.moveOut(source, moveId, 0, 5)).toBe(5);
    // Taken, not landed: the units are the source's transit only.
    expect(await a.client.reconcile({ couponId: id })).toMatchObject({ redisAvailable: 40n, redisDrift: 0n, consistent: true });

    expect(await a.app.store.credit(target, moveCreditId(moveId), 5)).toBe('applied');
    const landed = await a.client.reconcile({ couponId: id });
    expect(landed).toMatchObject({ redisAvailable: 40n, redisDrift: 0n, consistent: true });

    expect(await a.app.store.ackMove(source, moveId)).toBe(true);
    expect(await a.client.reconcile({ couponId: id })).toMatchObject({ redisAvailable: 40n, redisDrift: 0n, consistent: true });
    const levels = await a.app.store.probe([target, source]);
    expect(levels.map((l) => [l.available, l.inTransit])).toEqual([
      [25, 0],
      [15, 0],
    ]);
  });
});
