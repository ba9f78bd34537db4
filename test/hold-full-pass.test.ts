// The hold sweeper's backstop pass (hold-sweeper.ts fullPass) on the real cluster: it finds exactly the shards
// with open holds among many coupons' shards, with one script call per master and slice instead of a ZCARD per
// shard, and a set its master does not serve is still counted (on its own).
import type { Redis } from 'ioredis';
import slotOf from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShardRef } from '../src/domain/ports.js';
import { allShards, homeShard } from '../src/domain/routing.js';
import { HOLD_INDEX_PARTS, holdIndexKey } from '../src/redis/keys.js';
import { Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  // The periodic sweeps stay out of the way: the test calls the pass itself.
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'none', SHARDSTOCK_HOLD_SWEEP_MS: '60000', SHARDSTOCK_HOLD_TTL_MIN_MS: '100' });
});
afterAll(async () => {
  await a?.close();
});

/** calls of `command` on every master so far. */
async function masterCalls(command: string): Promise<number> {
  let n = 0;
  for (const node of a.app.redis.nodes('master') as Redis[]) {
    const m = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(await node.info('commandstats'));
    n += Number(m?.[1] ?? 0);
  }
  return n;
}

describe('hold full pass', () => {
  it('when 150 coupons of 4 shards have holds on a few shards and the index lost them, then the pass puts back exactly those, counting with one call per master and slice, not one ZCARD per shard', async () => {
    const prefix = uniqueId('hf');
    const ids = Array.from({ length: 150 }, (_, i) => `${prefix}-${i}`);
    await Promise.all(ids.map((couponId) => a.app.admin.create({ couponId, totalStock: 20n, shardCount: 4, perUserLimit: 0 })));
    const coupons = await Promise.all(ids.map(async (id) => (await a.app.repo.find(id))!));
    // Holds on 9 coupons, two requests each: their home shards are the ones the pass must find.
    const want = new Set<string>();
    for (const c of coupons.slice(0, 9)) {
      for (const rid of ['p', 'q']) {
        await a.client.reserve({ couponId: c.id, requestId: rid, quantity: 1n, ttlMs: 60_000 });
        want.add(`${c.id}|${homeShard(c, rid, '')}`);
      }
    }
    for (let part = 0; part < HOLD_INDEX_PARTS; part++) await a.app.redis.del(holdIndexKey(a.namespace, part));
    // biome-ignore lint/complexity/useLiteralKeys: a private member, reached by the test on purpose
    expect((await a.app.holdSweeper['store'].indexed()).length).toBe(0);

    const zcard0 = await masterCalls('zcard');
    const scripts0 = (await masterCalls('evalsha')) + (await masterCalls('eval'));
    const before = a.app.holdSweeper.stats.reindexed;
    await a.app.holdSweeper.fullPass(coupons);
    const zcards = (await masterCalls('zcard')) - zcard0;
    const scriptCalls = (await masterCalls('evalsha')) + (await masterCalls('eval')) - scripts0;

    expect(a.app.holdSweeper.stats.reindexed - before).toBe(want.size);
    // biome-ignore lint/complexity/useLiteralKeys: a private member, reached by the test on purpose
    const found = (await a.app.holdSweeper['store'].indexed()) as ShardRef[];
    expect(new Set(found.map((s) => `${s.couponId}|${s.index}`))).toEqual(want);
    // 600 shards, each counted once (Redis counts a script's ZCARDs under zcard too), in slices of 256 shards:
    // three slices, each one call per master it touches. A ZCARD per shard from the client made no script call.
    expect(zcards).toBe(600);
    expect(scriptCalls).toBeGreaterThanOrEqual(3);
    expect(scriptCalls).toBeLessThanOrEqual(9);
    // And a second pass changes nothing.
    await a.app.holdSweeper.fullPass(coupons);
    expect(a.app.holdSweeper.stats.reindexed - before).toBe(want.size);
  }, 60_000);

  it('when a call carries sets of another master, then those answer -1 and the others their counts, and the pass still finds their holds', async () => {
    const couponId = uniqueId('hm');
    await a.app.admin.create({ couponId, totalStock: 60n, shardCount: 12, perUserLimit: 0 });
    const coupon = (await a.app.repo.find(couponId))!;
    const rids = Array.from({ length: 12 }, (_, i) => `m${i}`);
    for (const rid of rids) await a.client.reserve({ couponId, requestId: rid, quantity: 1n, ttlMs: 60_000 });
    const held = new Map<number, number>();
    for (const rid of rids) {
      const i = homeShard(coupon, rid, '');
      held.set(i, (held.get(i) ?? 0) + 1);
    }
    const shards = allShards(coupon);
    const scripts = new Scripts(a.app.redis, a.namespace, a.app.config.idempotencyWindowS);
    const masterOf = (s: ShardRef) => a.app.redis.slots[slotOf(scripts.keys(s).holds)]![0];
    const first = masterOf(shards[0]!);
    expect(new Set(shards.map(masterOf)).size).toBeGreaterThan(1);

    const counts = await scripts.holdsOpen(shards);
    shards.forEach((s, i) => {
      expect(counts[i], `shard ${s.index}`).toBe(masterOf(s) === first ? (held.get(s.index) ?? 0) : -1);
    });

    // The store's pass groups by master, so the same shards in any order are all counted.
    for (let part = 0; part < HOLD_INDEX_PARTS; part++) await a.app.redis.del(holdIndexKey(a.namespace, part));
    // biome-ignore lint/complexity/useLiteralKeys: a private member, reached by the test on purpose
    const added = await a.app.holdSweeper['store'].reindex([...shards].reverse());
    expect(added).toBe(held.size);
  }, 60_000);
});
