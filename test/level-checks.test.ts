// When the level checks probe a changed coupon's shards, with thousands of coupons changing: the probes per
// announcement interval stay bounded, yet a crossing is still caught — at once when the shard levels this
// instance saw say so, within the settle delay when only another instance saw the units go — and fires once.
// The checks are the real low-stock and sold-out detectors; shards, marks and the clock are in memory.
import { afterEach, describe, expect, it } from 'vitest';
import type { Coupon } from '../src/domain/model.js';
import { LevelChecks } from '../src/watch/level-checks.js';
import { LowStockDetector } from '../src/watch/low-stock.js';
import { ShardLevels } from '../src/watch/shard-levels.js';
import { StockEventDetector } from '../src/watch/stock-events.js';

const SHARDS = 4;
const coupon = (id: string): Coupon => ({
  id,
  initialStock: 100,
  totalStock: 100,
  shardCount: SHARDS,
  perUserLimit: 0,
  shardTags: Array.from({ length: SHARDS }, (_, i) => `${id}#${i}.0`),
  preheated: false,
  settledRemaining: 100,
  createdAt: new Date(0),
});

/** Marks as Redis keeps them (SET NX / DEL), shared by every instance of a test. */
function sharedMarks() {
  const low = new Set<string>();
  const soldOut = new Set<string>();
  return {
    low: {
      trip: async (id: string) => !low.has(id) && !!low.add(id),
      rearm: async (id: string) => void low.delete(id),
    },
    stock: {
      markSoldOut: async (id: string) => !soldOut.has(id) && !!soldOut.add(id),
      clearSoldOut: async (id: string) => soldOut.delete(id),
    },
  };
}

/** The coupons' real units per shard (what a probe reads). */
class Shards {
  readonly units = new Map<string, number[]>();
  level(id: string): number[] {
    let u = this.units.get(id);
    if (!u) {
      u = Array(SHARDS).fill(25);
      this.units.set(id, u);
    }
    return u;
  }
  total(id: string): number {
    return this.level(id).reduce((a, b) => a + b, 0);
  }
}

const open: LevelChecks[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.close();
});

function instance(shards: Shards, marks: ReturnType<typeof sharedMarks>, clock: { now: number }) {
  const coupons = new Map<string, Coupon>();
  const get = (id: string) => {
    let c = coupons.get(id);
    if (!c) {
      c = coupon(id);
      coupons.set(id, c);
    }
    return c;
  };
  const levels = new ShardLevels();
  const lowEvents: string[] = [];
  const stockEvents: string[] = [];
  const probed: string[] = [];
  const low = new LowStockDetector({
    marks: marks.low,
    publish: (e) => lowEvents.push(e.couponId),
    global: { kind: 'percent', value: 10 },
    overrides: new Map(),
  });
  const sold = new StockEventDetector({
    exactLevel: async (id) => ({ available: shards.total(id), totalStock: 100 }),
    marks: marks.stock,
    publish: (e) => stockEvents.push(`${e.kind}:${e.couponId}`),
  });
  const checks = new LevelChecks({
    coupon: async (id) => get(id),
    peek: (id) => coupons.get(id),
    probe: async (c) => {
      probed.push(c.id);
      // What the store observer does with a probe's answer.
      levels.setAll(
        c.id,
        shards.level(c.id).map((available, index) => ({ index, available, inTransit: 0, net: 0 })),
      );
      return shards.total(c.id);
    },
    levels,
    checks: [low, sold],
    onError: (what, err) => {
      throw new Error(`${what}: ${String(err)}`);
    },
    tickMs: 1e9, // ticks are driven by the test
    settleMs: 1000,
    maxProbesPerTick: 32,
    now: () => clock.now,
  });
  open.push(checks);
  /** A Deduct on shard `index` served by this instance: the real units go down and the answer is seen. */
  const deduct = (id: string, index: number, units = 1) => {
    get(id);
    const l = shards.level(id);
    l[index] = Math.max(0, l[index]! - units);
    levels.set(id, index, l[index]!);
  };
  return { checks, deduct, lowEvents, stockEvents, probed, low };
}

const settle = () => new Promise((r) => setImmediate(r));

/** One announcement interval: the changed coupons are announced, then the checks tick. */
async function interval(x: ReturnType<typeof instance>, clock: { now: number }, changed: Iterable<string>): Promise<number> {
  for (const id of changed) x.checks.changed(id, false);
  const before = x.checks.probes;
  x.checks.tick();
  await settle();
  clock.now += 50;
  return x.checks.probes - before;
}

describe('level checks with many changed coupons', () => {
  it('when 2,000 coupons change every interval, then at most 32 probes start per interval, and a crossing seen in a Deduct answer is probed at the next tick and fires once', async () => {
    const shards = new Shards();
    const marks = sharedMarks();
    const clock = { now: 0 };
    const a = instance(shards, marks, clock);
    const ids = Array.from({ length: 2000 }, (_, i) => `c${i}`);

    // Every coupon changes in every interval (one unit every other interval, on a shard that turns around).
    const perInterval: number[] = [];
    // This instance never saw these shards: every coupon waits for its settle probe (1 s = 20 intervals), and
    // those 2,000 probes then take 63 intervals at 32 each.
    for (let round = 0; round < 90; round++) {
      for (const id of ids) a.deduct(id, round % SHARDS, round % 2);
      perInterval.push(await interval(a, clock, ids));
    }
    expect(Math.max(...perInterval)).toBeLessThanOrEqual(32);
    // Without the schedule every changed coupon would be probed every interval: 2,000 x 90.
    const total = perInterval.reduce((s, n) => s + n, 0);
    expect(total).toBeLessThanOrEqual(32 * perInterval.length);
    expect(total).toBeGreaterThan(0);
    expect(a.lowEvents).toEqual([]);

    // One coupon falls to its threshold (10 of 100) in this instance's own Deducts, among 2,000 changing ones
    // whose settle probes are due: it is probed in the very next tick, ahead of them.
    const hot = 'c1234';
    const left = shards.total(hot);
    for (let i = 0; i < left - 8; i++) {
      const l = shards.level(hot);
      a.deduct(hot, l.indexOf(Math.max(...l)));
    }
    expect(shards.total(hot)).toBe(8);
    a.probed.length = 0;
    expect(await interval(a, clock, ids)).toBeLessThanOrEqual(32);
    expect(a.probed[0]).toBe(hot);
    expect(a.lowEvents).toEqual([hot]);

    // Falling further is no new crossing: no event, and its Deducts bring no probe forward.
    a.deduct(hot, 0);
    a.probed.length = 0;
    await interval(a, clock, [hot]);
    expect(a.probed).not.toContain(hot);
    expect(a.lowEvents).toEqual([hot]);
  });

  it('when another instance took the units so the levels seen here look high, then the settle probe still catches the crossing, and of two instances only one fires', async () => {
    const shards = new Shards();
    const marks = sharedMarks();
    const clock = { now: 0 };
    const a = instance(shards, marks, clock);
    const b = instance(shards, marks, clock);
    const id = 'shared';
    // A sees every shard at 25 (its own Deducts), then B empties the coupon without A seeing any of it.
    for (let i = 0; i < SHARDS; i++) a.deduct(id, i, 0);
    await interval(a, clock, [id]);
    for (let i = 0; i < 100; i++) b.deduct(id, i % SHARDS);
    expect(shards.total(id)).toBe(0);
    // A's estimate (100) suspects nothing: nothing is probed before the settle delay...
    a.deduct(id, 0, 0);
    a.checks.changed(id, false);
    a.probed.length = 0;
    for (let t = 0; t < 19; t++) await interval(a, clock, []);
    expect(a.probed).toEqual([]);
    // ...and once it is due, the probe sees the coupon empty.
    for (let t = 0; t < 2; t++) await interval(a, clock, []);
    expect(a.probed).toEqual([id]);
    // B saw it in its own answers: probed at once.
    await interval(b, clock, [id]);
    expect([...a.lowEvents, ...b.lowEvents]).toEqual([id]);
    expect([...a.stockEvents, ...b.stockEvents]).toEqual([`sold_out:${id}`]);
  });

  it('when units come back, then the coupon is probed at the next tick, the low mark is re-armed and back-in-stock fires once', async () => {
    const shards = new Shards();
    const marks = sharedMarks();
    const clock = { now: 0 };
    const a = instance(shards, marks, clock);
    const id = 'back';
    for (let i = 0; i < 100; i++) a.deduct(id, i % SHARDS);
    await interval(a, clock, [id]);
    expect(a.lowEvents).toEqual([id]);
    expect(a.stockEvents).toEqual([`sold_out:${id}`]);
    shards.level(id)[2] = 50; // a restock
    a.checks.changed(id, true);
    await interval(a, clock, []);
    expect(a.stockEvents).toEqual([`sold_out:${id}`, `back_in_stock:${id}`]);
    // Re-armed: the next fall below the threshold fires again.
    for (let i = 0; i < 45; i++) a.deduct(id, 2);
    await interval(a, clock, [id]);
    expect(a.lowEvents).toEqual([id, id]);
  });
});
