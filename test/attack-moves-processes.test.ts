// Attack: several service PROCESSES deduct (and reserve, and compensate) the same small coupon spread over
// many shards, so almost every call falls back and moves units between shards; request ids are repeated
// across processes. Counted exactly afterwards: never oversold, no user above the limit, no shard negative,
// nothing in transit once moves land, and the ledger matches once settled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTs } from './support/processes.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { ledgerFigures, settled, waitFor } from './support/settlement.js';
import { MoveSweeper } from '../src/domain/move-sweeper.js';
import type { ShardReloader } from '../src/domain/shard-reloader.js';

interface ChildResult {
  outcomes: Record<string, number>;
  errors: Record<string, number>;
  deducted: { requestId: string; userId: string; granted: number; replayed: boolean }[];
  compensated: string[];
  held: { requestId: string; userId: string }[];
}

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle,sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '200' });
});
afterAll(async () => {
  await a?.close();
});

function child(args: Record<string, unknown>) {
  const proc = spawnTs('test/support/mix-child.ts', [JSON.stringify({ namespace: a.namespace, ...args })]);
  let out = '';
  let err = '';
  let ticks = 0;
  const tickWaiters: { n: number; resolve: () => void }[] = [];
  proc.stdout!.on('data', (d: Buffer) => {
    out += d;
    ticks += d
      .toString()
      .split('\n')
      .filter((l) => l === 'tick').length;
    for (const w of tickWaiters.splice(0))
      if (ticks >= w.n) w.resolve();
      else tickWaiters.push(w);
  });
  proc.stderr!.on('data', (d: Buffer) => (err += d));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return {
    proc,
    ticks: (n: number) => new Promise<void>((resolve) => (ticks >= n ? resolve() : tickWaiters.push({ n, resolve }))),
    async result(): Promise<ChildResult> {
      const code = await exited;
      if (code !== 0) throw new Error(`child exited ${code}: ${err}`);
      return JSON.parse(out.trim().split('\n').pop()!) as ChildResult;
    },
    exited,
  };
}

/** Once every move has landed and every event settled: the shards' state and the ledger's figures. */
async function landedAndSettled(id: string) {
  await waitFor(
    'moves to land',
    () => shardState(a.app, id),
    (s) => s.inTransit === 0 && s.pendingMoves === 0,
    30_000,
  );
  await settled(a.client, id);
  return { s: await shardState(a.app, id), f: await ledgerFigures(a.app, id) };
}

const noReload = {
  reload: async () => {
    throw new Error('unexpected reload');
  },
} as unknown as ShardReloader;

async function checkCoupon(id: string, stock: number, limit: number, results: ChildResult[]) {
  const deducted = new Map<string, string>();
  for (const r of results) for (const d of r.deducted) deducted.set(d.requestId, d.userId);
  const compensated = new Set(results.flatMap((r) => r.compensated));
  const perUser = new Map<string, number>();
  for (const [rid, user] of deducted) if (!compensated.has(rid)) perUser.set(user, (perUser.get(user) ?? 0) + 1);
  const held = new Map<string, string>();
  for (const r of results) for (const h of r.held) held.set(h.requestId, h.userId);
  for (const user of held.values()) perUser.set(user, (perUser.get(user) ?? 0) + 1);
  const kept = deducted.size - compensated.size;
  // Moves land (the sweeper finishes what a mover left) and the outbox drains.
  const { s, f } = await landedAndSettled(id);
  return {
    kept,
    overLimit: [...perUser.entries()].filter(([, n]) => n > limit),
    negative: s.levels.filter((l) => (l.available ?? 0) < 0).map((l) => l.index),
    available: s.available,
    held: s.held,
    holds: held.size,
    net: s.net,
    ledger: { deductRows: f.deductRows, compensateRows: f.compensateRows, remaining: f.remaining, duplicates: f.duplicates },
    expectLedger: { deductRows: deducted.size, compensateRows: compensated.size, remaining: stock - kept, duplicates: 0 },
  };
}

describe('fallback moves across service processes', () => {
  for (const limit of [1, 3]) {
    it(`37 units over 16 shards, limit ${limit}: three processes with repeated request ids and compensations count exactly`, async () => {
      const id = uniqueId();
      await a.client.createCoupon({ couponId: id, totalStock: 37n, shardCount: 16, perUserLimit: limit });
      const users = limit === 1 ? 60 : 25;
      const kids = [0, 1, 2].map((p) =>
        child({
          couponId: id,
          // Two processes share request ids (retries landing on another instance), the third has its own.
          idPrefix: p < 2 ? 'shared' : 'own',
          count: 150,
          users,
          concurrency: 60,
          compensateEvery: 5,
          reserveEvery: 7,
        }),
      );
      const results = await Promise.all(kids.map((k) => k.result()));
      for (const r of results) expect(r.errors).toEqual({});
      const c = await checkCoupon(id, 37, limit, results);
      expect(c.overLimit).toEqual([]);
      expect(c.negative).toEqual([]);
      expect(c.kept).toBeLessThanOrEqual(37);
      expect(c.held).toBe(c.holds);
      expect(c.available + c.held).toBe(37 - c.kept);
      expect(c.ledger).toEqual(c.expectLedger);
    }, 120_000);
  }

  it('a process killed -9 in the middle of moves loses no unit and creates none once the sweeper lands its moves', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 400n, shardCount: 16, perUserLimit: 3 });
    const victim = child({ couponId: id, idPrefix: 'v', count: 5000, users: 2000, concurrency: 150, compensateEvery: 4, ticks: true });
    const survivor = child({ couponId: id, idPrefix: 's', count: 600, users: 300, concurrency: 60, compensateEvery: 3 });
    await victim.ticks(15);
    victim.proc.kill('SIGKILL');
    await victim.exited;
    const r = await survivor.result();
    expect(r.errors).toEqual({});
    const coupon = (await a.app.repo.find(id))!;
    await new MoveSweeper(a.app.store, noReload, 0).sweep(coupon);
    const { s, f } = await landedAndSettled(id);
    expect(s.levels.filter((l) => (l.available ?? 0) < 0)).toEqual([]);
    // Every unit is on sale or sold (recorded in MySQL): none lost, none created.
    expect(s.available).toBe(f.remaining);
    expect(f.deductUnits - f.compensateUnits).toBe(400 - f.remaining);
    expect(f.duplicates).toBe(0);
  }, 120_000);
});
