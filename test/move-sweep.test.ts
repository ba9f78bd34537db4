// The sweep worker on the real stack: a move started by an instance that died (written straight to Redis,
// unseen by this instance's store answers) is found by the sweep's cycle and landed once it is past its grace;
// one this instance saw in transit in a probe is landed too. Units are conserved throughout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardRef } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { waitFor } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '100' });
});
afterAll(async () => {
  await a?.close();
});

describe('the sweep worker', () => {
  it('when a dead instance left moves on coupons this one serves, then the sweep lands them and the units add up', async () => {
    const ids = [uniqueId('sw'), uniqueId('sw')];
    for (const id of ids) await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 4 });
    const [c0, c1] = await Promise.all(ids.map(async (id) => (await a.app.repo.find(id))!));
    // Step 1 of two moves by "another instance" (the raw store: this instance's answers never see them).
    expect(await a.app.store.moveOut(shardRef(c0!, 3), 'gone/0/3>0', 0, 5)).toBe(5);
    expect(await a.app.store.moveOut(shardRef(c1!, 1), 'gone/0/1>2', 2, 6)).toBe(6);
    // This instance probes the second coupon (GetStock with shards): it sees units in transit there.
    await a.client.getStock({ couponId: ids[1]!, includeShards: true });
    for (const id of ids) expect((await shardState(a.app, id)).inTransit).toBeGreaterThan(0);
    for (const id of ids) {
      const s = await waitFor(
        `the sweep to land the move on ${id}`,
        () => shardState(a.app, id),
        (st) => st.inTransit === 0 && st.pendingMoves === 0,
        15_000,
      );
      expect(s.available).toBe(40);
    }
    expect(a.app.sweepPlan.landed).toBe(2);
    expect(a.app.sweepPlan.cycles).toBeGreaterThan(0);
  });
});
