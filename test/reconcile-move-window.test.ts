// Reconcile while a fallback move is between its credit and its acknowledgement: its units are in the target's
// avail and still in the source's transit. Counted in both, Redis looked above its bound (redisDrift +5) on a
// coupon where nothing was wrong, which the reconciler's read order promises never to happen. And a move made
// whole between the two shards' reads: taken from the source after its read, landed before the target's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moveCreditId } from '../src/domain/ids.js';
import type { ShardRef } from '../src/domain/ports.js';
import { shardRef } from '../src/domain/routing.js';
import { InFlight } from '../src/settlement/reconcile/in-flight.js';
import { Reconciler } from '../src/settlement/reconcile/reconciler.js';
import type { OutboxStreams } from '../src/settlement/relay/outbox.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await a?.close();
});

/** A coupon of 40 units on 2 shards of 20; moves go from shard 1 (source) to shard 0 (target). */
async function twoShards() {
  const id = uniqueId('rm');
  await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 2 });
  const coupon = (await a.app.repo.find(id))!;
  return { id, source: shardRef(coupon, 1), target: shardRef(coupon, 0) };
}

describe('reconcile during a fallback move', () => {
  it('when a move has landed at its target and is not acknowledged yet, then Reconcile counts its units once', async () => {
    const { id, source, target } = await twoShards();
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

  it('when a move starts after its source was read and lands before its target is read, then Reconcile reads again and counts its units once', async () => {
    const { id, source, target } = await twoShards();
    const moveId = 'm-between-reads';

    // The target's first read waits until the source's read is back and a whole move (out, credit, ack) ran
    // after it; the reads after that run as they come.
    const real = a.app.settlement.outbox;
    let sourceRead: () => void = () => {};
    const sourceReadDone = new Promise<void>((resolve) => (sourceRead = resolve));
    const reads = [0, 0];
    const raced: OutboxStreams = Object.assign(Object.create(real) as OutboxStreams, {
      snapshot: async (ref: ShardRef) => {
        const n = reads[ref.index]!++;
        if (ref.index === source.index) {
          const s = await real.snapshot(ref);
          if (n === 0) sourceRead();
          return s;
        }
        if (n === 0) {
          await sourceReadDone;
          expect(await a.app.store.moveOut(source, moveId, target.index, 5)).toBe(5);
          expect(await a.app.store.credit(target, moveCreditId(moveId), 5)).toBe('applied');
          expect(await a.app.store.ackMove(source, moveId)).toBe(true);
        }
        return real.snapshot(ref);
      },
    });
    const s = a.app.settlement;
    const r = await new Reconciler(s.ledger, new InFlight(s.ledger, raced, s.stream)).reconcile(id);

    // The first read saw 20 at the source and 25 at the target: 45 of 40, had it been used.
    expect(r).toMatchObject({ redisAvailable: 40, redisDrift: 0, consistent: true });
    expect(reads).toEqual([2, 2]);
    const levels = await a.app.store.probe([target, source]);
    expect(levels.map((l) => [l.available, l.inTransit])).toEqual([
      [25, 0],
      [15, 0],
    ]);
  });
});
