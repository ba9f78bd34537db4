// Hold expiry on the real stack (#15 test 1): holds made by separate instance processes, none confirmed,
// come back exactly once when they expire — judged by Redis's clock and done by whichever instances' sweepers
// are alive, also when the instance that made them was SIGKILLed before the expiry.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holdIdOf } from '../src/domain/holds.js';
import { HOLD_INDEX_PARTS, holdIndexKey } from '../src/redis/keys.js';
import { homeShard } from '../src/domain/routing.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { runTs, spawnTs } from './support/processes.js';
import { settled, sleep, waitFor } from './support/settlement.js';

const LOAD = 'test/support/hold-load.ts';
let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({
    SHARDSTOCK_WORKERS: 'relay,settle',
    SHARDSTOCK_INSTANCE_ID: 'expiry-a',
    SHARDSTOCK_HOLD_TTL_MIN_MS: '100',
    SHARDSTOCK_HOLD_SWEEP_MS: '100',
  });
});
afterAll(async () => {
  await a?.close();
});

/** Every request id's hold as recorded, by state (requests refused have none). */
async function holdStates(t: TestApp, couponId: string, requestIds: string[]) {
  const coupon = await t.app.admin.level(couponId, false).then(() => t.app.repo.find(couponId));
  const states = new Map<string, number>();
  await Promise.all(
    requestIds.map(async (rid) => {
      const h = await t.app.holds.get(holdIdOf(couponId, homeShard(coupon!, rid, ''), rid));
      const k = h?.state ?? 'none';
      states.set(k, (states.get(k) ?? 0) + 1);
    }),
  );
  return Object.fromEntries(states);
}

async function expectAllBack(couponId: string, units: number) {
  await waitFor(
    'every held unit back',
    () => a.client.getStock({ couponId }),
    (r) => r.level!.held === 0n && r.level!.available === BigInt(units),
    20_000,
    50,
  );
  // Nothing comes back twice: a while later the level is still exactly the stock, and Reconcile agrees.
  await sleep(600);
  const level = (await a.client.getStock({ couponId, includeShards: true })).level!;
  expect([level.available, level.held, level.deducted]).toEqual([BigInt(units), 0n, 0n]);
  expect(level.shards.reduce((s, x) => s + x.available, 0n)).toBe(BigInt(units));
  const rec = await settled(a.client, couponId);
  expect([rec.consistent, rec.redisAvailable, rec.redisHeld, rec.ledgerDeducted]).toEqual([true, BigInt(units), 0n, 0n]);
}

describe('hold expiry', () => {
  it('when 3 processes make 2,000 holds of 2 s on 1,000 units and confirm none, then exactly 1,000 are held and all units come back exactly once', async () => {
    const couponId = uniqueId('hx');
    await a.client.createCoupon({ couponId, totalStock: 1000n, shardCount: 8 });
    const counts = [667, 667, 666];
    const results = await Promise.all(
      counts.map((count, i) =>
        runTs<{ held: number; refused: number; failed: number; errors: string[] }>(LOAD, [
          JSON.stringify({ namespace: a.namespace, couponId, count, prefix: `p${i}`, ttlMs: 2000 }),
        ]),
      ),
    );
    const held = results.reduce((s, r) => s + r.held, 0);
    expect(results.flatMap((r) => (r.failed > 0 ? [r] : []))).toEqual([]);
    // 1,000 at once at most; more only if early holds expired while later requests were still coming (a slow
    // machine), whose units were then held again.
    expect(held).toBeGreaterThanOrEqual(1000);
    expect(results.reduce((s, r) => s + r.refused, 0)).toBe(2000 - held);

    await expectAllBack(couponId, 1000);
    const ids = counts.flatMap((n, i) => Array.from({ length: n }, (_, j) => `p${i}-${j}`));
    // Every hold answered HELD expired (none confirmed, none lost); refused requests left no hold.
    expect(await holdStates(a, couponId, ids)).toEqual(held === 2000 ? { expired: 2000 } : { expired: held, none: 2000 - held });
  }, 120_000);

  it('when the instance that made the holds is SIGKILLed before they expire, then another instance gives every unit back exactly once', async () => {
    const couponId = uniqueId('hk');
    await a.client.createCoupon({ couponId, totalStock: 1000n, shardCount: 8 });
    const child = spawnTs(LOAD, [JSON.stringify({ namespace: a.namespace, couponId, count: 1200, prefix: 'k', ttlMs: 4000, stay: true })]);
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out.split('\n')[0]!);
      });
      child.once('exit', (code) => reject(new Error(`hold-load exited ${code} before reporting`)));
    });
    const r = JSON.parse(line) as { held: number; refused: number; failed: number };
    expect([r.failed, r.held + r.refused]).toEqual([0, 1200]);
    expect(r.held).toBeGreaterThanOrEqual(1000);
    const before = (await a.client.getStock({ couponId })).level!;
    // Killed before the expiry: the units are held by a process that will never release them.
    expect(before.held).toBeGreaterThan(0n);
    child.kill('SIGKILL');
    await new Promise((res) => child.once('exit', res));

    await expectAllBack(couponId, 1000);
    const ids = Array.from({ length: 1200 }, (_, j) => `k-${j}`);
    expect(await holdStates(a, couponId, ids)).toEqual(r.held === 1200 ? { expired: 1200 } : { expired: r.held, none: 1200 - r.held });
  }, 120_000);

  it('when a shard drops out of the sweepers index (a crash between a Reserve and its add), then its holds wait for the full pass, which expires them exactly once', async () => {
    const couponId = uniqueId('hi');
    await a.client.createCoupon({ couponId, totalStock: 10n, shardCount: 2 });
    for (let i = 0; i < 3; i++) await a.client.reserve({ couponId, requestId: `i${i}`, quantity: 1n, ttlMs: 1500 });
    for (let part = 0; part < HOLD_INDEX_PARTS; part++) await a.app.redis.del(holdIndexKey(a.namespace, part));
    // Well past the expiry, nothing came back: sweepers look only where the index points.
    await sleep(2500);
    expect((await a.client.getStock({ couponId })).level!.held).toBe(3n);
    await a.app.holdSweeper.fullPass([(await a.app.repo.find(couponId))!]);
    await expectAllBack(couponId, 10);
  }, 60_000);
});
