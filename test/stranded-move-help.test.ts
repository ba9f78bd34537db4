// A mover that dies between taking units out of a source shard and landing them leaves them in transit. Callers
// that need them used to wait (each round sees units in transit) until the sweeper landed the move, 3–5 s
// later on its own schedule: every such Deduct in between ran out of rounds and was answered ABORTED, and with
// no sweeper running (an instance without the sweep worker) they stayed stranded. A waiting Deduct now lands a
// move it has seen stranded for a while itself, as the sweeper would: credit by move id (idempotent, so a live
// mover racing it cannot double it), then acknowledge.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { requestIdHomedAt } from './support/routing.js';

let a: TestApp;
beforeAll(async () => {
  // No sweeper: only the waiting callers can land the stranded move.
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
});
afterAll(async () => {
  await a?.close();
});

describe('a move stranded by a dead mover', () => {
  it('when every unit left is in a dead mover’s transit, then concurrent Deducts land it themselves and sell exactly those units', async () => {
    const id = uniqueId('sm');
    await a.client.createCoupon({ couponId: id, totalStock: 8n, shardCount: 2 });
    const coupon = (await a.app.repo.find(id))!;
    // Shard 0 sells its 4; shard 1's 4 leave for shard 0 in a move nobody lands (its mover "died").
    for (let i = 0; i < 4; i++) {
      const r = await a.app.deduct.deduct({ couponId: id, requestId: requestIdHomedAt(coupon, 0, `first${i}`), userId: '', quantity: 1n });
      expect(r.outcome).toBe('deducted');
    }
    expect(await a.app.store.moveOut(shardRef(coupon, 1), `dead-${id}`, 0, 4)).toBe(4);

    // Six callers for the four stranded units, on both shards.
    const calls = Array.from({ length: 6 }, (_, i) =>
      a.app.deduct
        .deduct({ couponId: id, requestId: `late-${i}`, userId: '', quantity: 1n })
        .then((r) => r.outcome)
        .catch((err: Error) => `error: ${err.message}`),
    );
    const outcomes = await Promise.all(calls);
    expect(outcomes.filter((o) => o === 'deducted')).toHaveLength(4);
    expect(outcomes.filter((o) => o === 'sold_out')).toHaveLength(2);

    const levels = await a.app.store.probe([shardRef(coupon, 0), shardRef(coupon, 1)]);
    expect(levels.map((l) => [l.available, l.inTransit])).toEqual([
      [0, 0],
      [0, 0],
    ]);
    expect(await a.app.store.pendingMoves(shardRef(coupon, 1))).toEqual([]);
    const rec = await a.client.reconcile({ couponId: id });
    expect(rec).toMatchObject({ redisAvailable: 0n, redisDrift: 0n });
    // One move, landed once, by a caller: what an operator sees on /metrics.
    const metrics = (await a.app.metrics.render()).body;
    expect(metrics).toMatch(/^shardstock_stranded_moves_landed_by_callers_total 1$/m);
    expect(metrics).toMatch(/^shardstock_stranded_moves_landed_by_sweeper_total 0$/m);
  });
});
