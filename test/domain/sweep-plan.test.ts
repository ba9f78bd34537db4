// The move sweep reads suspect shards plus a bounded slice of every served shard, not every shard every
// sweep, and still lands every started move: one this instance started at the next sweep, one nobody here saw
// start within one cycle. Over the in-memory store, counting its pendingMoves reads exactly.
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { MoveSweeper } from '../../src/domain/move-sweeper.js';
import type { Coupon, StockStore } from '../../src/domain/ports.js';
import { shardRef } from '../../src/domain/routing.js';
import { MoveSuspects, moveObservers, SweepPlan } from '../../src/domain/sweep-plan.js';
import { FastCounter, FastHistogram } from '../../src/observability/fast-metrics.js';
import { timed } from '../../src/observability/timed-store.js';
import { fakeDomain } from '../support/fakes/index.js';

function setup(graceMs = 0, minSlice = 1024) {
  const d = fakeDomain();
  const suspects = new MoveSuspects();
  const registry = new Registry();
  // What this instance's calls go through: the store answers feed the suspects, as src/app/domain.ts wires it.
  const observed: StockStore = timed(
    d.store,
    new FastHistogram('d_seconds', 'h', ['op'], [1], registry),
    new FastCounter('e_total', 'c', ['op'], registry),
    { observers: moveObservers(suspects) },
  );
  const sweeper = new MoveSweeper(observed, d.reloader, graceMs);
  const plan = new SweepPlan({ suspects, sweeper, coupons: d.catalog, intervalMs: 2000, minSlice });
  // Shards read: a shard with moves is read a second time after its coupon's epochs (one epochs read per shard
  // of the coupon), so that second read is not counted.
  const count = () => (d.store.calls.pendingMoves ?? 0) - (d.store.calls.epochs ?? 0) / 4;
  const reads = async () => {
    const before = count();
    const report = await plan.run();
    return { ...report, reads: count() - before };
  };
  return { d, suspects, observed, sweeper, plan, reads };
}

async function coupons(d: ReturnType<typeof fakeDomain>, n: number, shards: number): Promise<Coupon[]> {
  const out: Coupon[] = [];
  for (let i = 0; i < n; i++) out.push(await d.createCoupon(`c${i}`, 40, shards));
  return out;
}

describe('the move sweep plan', () => {
  it('when 2,500 coupons of 4 shards are served, then a sweep reads at most the slice, a cycle covers all 10,000 shards once, and a move nobody here saw start is landed within it', async () => {
    const { d, reads } = setup(0, 1024);
    const cs = await coupons(d, 2500, 4);
    // Another instance started a move on a shard deep in the cycle and died: only the cycle can find it.
    const far = cs[2200]!;
    expect(await d.store.moveOut(shardRef(far, 3), 'dead-mover', 0, 4)).toBe(4);
    expect(d.units(far)).toMatchObject({ transit: 4, sum: 40 });

    const perSweep: number[] = [];
    let landedAt = -1;
    for (let sweep = 0; sweep < 10; sweep++) {
      const r = await reads();
      perSweep.push(r.reads);
      if (r.done > 0) landedAt = sweep;
      if (r.cycleEnded) break;
    }
    // ceil(10,000 / 1,024) = 10 sweeps; each read at most 1,024 shards; together every shard exactly once.
    expect(perSweep).toHaveLength(10);
    expect(Math.max(...perSweep)).toBeLessThanOrEqual(1024);
    expect(perSweep.reduce((a, b) => a + b, 0)).toBe(10_000);
    expect(landedAt).toBe(Math.floor((2200 * 4 + 3) / 1024));
    expect(d.units(far)).toEqual({ avail: 40, transit: 0, net: 0, sum: 40 });
    expect(await d.store.pendingMoves(shardRef(far, 3))).toEqual([]);
  });

  it('when this instance starts a move whose landing fails, then the next sweep reads that shard first, wherever the cycle is', async () => {
    const { d, observed, suspects, reads } = setup(0, 16);
    const cs = await coupons(d, 100, 4);
    const c = cs[90]!;
    // A mover took units out (through the observed store), then died before crediting and acknowledging.
    expect(await observed.moveOut(shardRef(c, 2), 'mine', 0, 3)).toBe(3);
    expect(suspects.size).toBe(1);
    const r = await reads();
    // The slice (16 shards of the first coupons) plus the one suspect.
    expect(r.reads).toBe(17);
    expect(r.done).toBe(1);
    expect(suspects.size).toBe(0);
    expect(d.units(c)).toEqual({ avail: 40, transit: 0, net: 0, sum: 40 });
  });

  it('when another instance moves units and this one only sees them in transit in a probe, then that shard is swept next', async () => {
    const { d, observed, suspects, reads } = setup(0, 8);
    const cs = await coupons(d, 50, 4);
    const c = cs[40]!;
    await d.store.moveOut(shardRef(c, 1), 'theirs', 3, 5);
    await observed.probe([0, 1, 2, 3].map((i) => shardRef(c, i)));
    expect(suspects.size).toBe(1);
    const r = await reads();
    expect(r.reads).toBe(9);
    expect(r.done).toBe(1);
    expect(d.units(c)).toMatchObject({ transit: 0, sum: 40 });
  });

  it('when a move is still too young for the sweeper, then its shard stays a suspect and is landed once old enough', async () => {
    const { d, observed, suspects, reads } = setup(150, 4);
    const [c] = await coupons(d, 1, 4);
    await observed.moveOut(shardRef(c!, 0), 'young', 1, 2);
    let r = await reads();
    expect(r.done).toBe(0);
    expect(suspects.size).toBe(1);
    expect(d.units(c!).transit).toBe(2);
    await new Promise((res) => setTimeout(res, 200));
    r = await reads();
    expect(r.done).toBe(1);
    expect(suspects.size).toBe(0);
    expect(d.units(c!)).toEqual({ avail: 40, transit: 0, net: 0, sum: 40 });
  });

  it('when reading one shard fails, then the other shards are still swept, the sweep reports the failure, and the failed shard is retried next sweep', async () => {
    const { d, observed, suspects, plan } = setup(0, 4);
    const [a, b] = await coupons(d, 2, 4);
    await observed.moveOut(shardRef(a!, 0), 'ma', 1, 2);
    await observed.moveOut(shardRef(b!, 0), 'mb', 1, 2);
    let broken = true;
    d.store.beforeCall = (method, shard) => {
      if (broken && method === 'pendingMoves' && shard.couponId === a!.id && shard.index === 0) throw new Error('ECONNRESET');
    };
    await expect(plan.run()).rejects.toThrow('ECONNRESET');
    expect(d.units(b!)).toMatchObject({ transit: 0, sum: 40 });
    expect(d.units(a!).transit).toBe(2);
    expect(suspects.size).toBe(1);
    broken = false;
    expect((await plan.run()).done).toBe(1);
    expect(d.units(a!)).toEqual({ avail: 40, transit: 0, net: 0, sum: 40 });
  });

  it('when 25,000 coupons of 4 shards are served, then the slice grows so that a cycle still ends within a minute of sweeps', async () => {
    const d = fakeDomain();
    const many = Array.from(
      { length: 25_000 },
      (_, i) => ({ id: `m${i}`, shardTags: [`m${i}a`, `m${i}b`, `m${i}c`, `m${i}d`] }) as unknown as Coupon,
    );
    const plan = new SweepPlan({
      suspects: new MoveSuspects(),
      sweeper: new MoveSweeper(d.store, d.reloader, 0),
      coupons: { active: () => many, peek: () => undefined },
      intervalMs: 2000,
    });
    const perSweep: number[] = [];
    for (let sweep = 0; sweep < 40; sweep++) {
      const before = d.store.calls.pendingMoves ?? 0;
      const r = await plan.run();
      perSweep.push((d.store.calls.pendingMoves ?? 0) - before);
      if (r.cycleEnded) break;
    }
    // 100,000 shards over 60 s / 2 s = 30 sweeps: 3,334 per sweep, every shard once.
    expect(perSweep).toHaveLength(30);
    expect(Math.max(...perSweep)).toBe(3334);
    expect(perSweep.reduce((a, b) => a + b, 0)).toBe(100_000);
    expect(plan.cycles).toBe(1);
  });
});
