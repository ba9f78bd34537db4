// Attack on holds (docs/guarantees.md "Holds"): every way to end one hold — Confirm (whole and partial),
// Release, ExtendHold, Reserve replays — sent for the same hold at the same time from two instances, then the
// confirmed deductions compensated twice at once. Each hold must end exactly once (confirmed XOR released),
// each confirmed unit be deducted once and given back at most once, the per-user counts follow every step
// (a user can take exactly their limit again), and the ledger, Redis and Reconcile agree to the unit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CompensateOutcome,
  ConfirmOutcome,
  DeductOutcome,
  ExtendOutcome,
  ReleaseOutcome,
  ReserveOutcome,
  type ConfirmResponse,
  type ExtendHoldResponse,
  type ReleaseResponse,
  type ReserveResponse,
} from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled } from './support/settlement.js';

const FAST = { SHARDSTOCK_HOLD_SWEEP_MS: '20', SHARDSTOCK_WORKERS: 'relay,settle' };
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp({ ...FAST, SHARDSTOCK_INSTANCE_ID: 'atk-a' });
  b = await startTestApp({ ...FAST, SHARDSTOCK_NAMESPACE: a.namespace, SHARDSTOCK_INSTANCE_ID: 'atk-b' });
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

const LIMIT = 4;
const N = 120;
const HELD = 3;

describe('attack: one hold ended many ways at once', () => {
  it('when confirm (whole or partial), release, extend and reserve replays race per hold from two instances, and the confirmed ones are compensated twice at once, then every unit is deducted once and returned once, user counts and ledger exact', async () => {
    const couponId = uniqueId('ahl');
    const total = 1000;
    await a.client.createCoupon({ couponId, totalStock: BigInt(total), shardCount: 3, perUserLimit: LIMIT });
    const user = (i: number) => `au${i}`;
    const reserve = (c: TestApp, i: number) =>
      c.client.reserve({ couponId, requestId: `h${i}`, userId: user(i), quantity: BigInt(HELD), ttlMs: 30_000 });
    const first = await Promise.all(Array.from({ length: N }, (_, i) => reserve(i % 2 ? a : b, i)));
    expect(first.map((r) => r.outcome)).toEqual(Array(N).fill(ReserveOutcome.HELD));
    const holdIds = first.map((r) => r.hold!.holdId);
    // Each user is at HELD of LIMIT: one more unit fits, two do not.
    expect((await a.client.reserve({ couponId, requestId: 'probe-x', userId: user(0), quantity: 2n, ttlMs: 30_000 })).outcome).toBe(
      ReserveOutcome.USER_LIMIT_EXCEEDED,
    );

    // Hold i: keep = 0 (all), 1 or 2 units, from both instances; a release and an extend from both; replays.
    const keepOf = (i: number) => i % 3;
    const race = await Promise.all(
      holdIds.map(async (holdId, i) => {
        const target = { case: 'holdId' as const, value: holdId };
        // Sent in a different order per hold, so that each kind of call is sometimes first to the shard.
        const calls = [
          () => a.client.confirm({ target, quantity: BigInt(keepOf(i)) }),
          () => b.client.confirm({ target, quantity: BigInt(keepOf(i)) }),
          () => b.client.release({ target, reason: 'race' }),
          () => a.client.release({ target, reason: 'race' }),
          () => a.client.extendHold({ target, ttlMs: 40_000 }),
          () => b.client.extendHold({ target, ttlMs: 40_000 }),
          () => reserve(a, i),
          () => reserve(b, i),
        ];
        const order = calls.map((_, k) => k).sort(() => Math.random() - 0.5);
        const started: Promise<unknown>[] = [];
        for (const k of order) started[k] = calls[k]!();
        const [c1, c2, r1, r2, e1, , p1, p2] = (await Promise.all(started)) as [
          ConfirmResponse,
          ConfirmResponse,
          ReleaseResponse,
          ReleaseResponse,
          ExtendHoldResponse,
          ExtendHoldResponse,
          ReserveResponse,
          ReserveResponse,
        ];
        return { c: [c1, c2], r: [r1, r2], e1, p: [p1, p2] };
      }),
    );
    const confirmed: number[] = [];
    const kept = new Map<number, number>();
    for (const [i, x] of race.entries()) {
      const won = x.c.some((c) => c.outcome === ConfirmOutcome.CONFIRMED);
      const released = x.r.some((r) => r.outcome === ReleaseOutcome.RELEASED);
      expect(won !== released, `hold ${i}: confirmed ${won}, released ${released}`).toBe(true);
      if (won) {
        // Both confirms say CONFIRMED (one a replay), both releases CONFIRMED; the units kept are the same.
        expect(x.c.map((c) => c.outcome)).toEqual([ConfirmOutcome.CONFIRMED, ConfirmOutcome.CONFIRMED]);
        expect(x.c.filter((c) => !c.replayed)).toHaveLength(1);
        expect(x.r.map((r) => r.outcome)).toEqual([ReleaseOutcome.CONFIRMED, ReleaseOutcome.CONFIRMED]);
        confirmed.push(i);
        kept.set(i, keepOf(i) || HELD);
      } else {
        expect(x.c.map((c) => c.outcome)).toEqual([ConfirmOutcome.RELEASED, ConfirmOutcome.RELEASED]);
        expect(x.r.map((r) => r.outcome).sort()).toEqual([ReleaseOutcome.RELEASED, ReleaseOutcome.ALREADY_RELEASED]);
        expect(x.r.reduce((s, r) => s + r.released, 0n)).toBe(BigInt(HELD));
      }
      expect([ExtendOutcome.EXTENDED, ExtendOutcome.CONFIRMED, ExtendOutcome.RELEASED]).toContain(x.e1.outcome);
      for (const p of x.p) expect([p.outcome, p.replayed]).toEqual([ReserveOutcome.HELD, true]);
    }
    // Both sides of the race happened.
    expect(confirmed.length).toBeGreaterThan(0);
    expect(confirmed.length).toBeLessThan(N);
    const keptUnits = [...kept.values()].reduce((s, k) => s + k, 0);
    let level = (await a.client.getStock({ couponId })).level!;
    expect([level.held, level.deducted, level.available]).toEqual([0n, BigInt(keptUnits), BigInt(total - keptUnits)]);

    // Compensate half of the confirmed ones twice at once, from both instances: exactly one gives units back.
    const back = confirmed.filter((_, j) => j % 2 === 0);
    const comps = await Promise.all(
      back.map((i) =>
        Promise.all([a, b].map((c) => c.client.compensate({ couponId, requestId: `h${i}`, reason: 'refund' }))).then((rs) => ({ i, rs })),
      ),
    );
    let backUnits = 0;
    for (const { i, rs } of comps) {
      expect(rs.map((r) => r.outcome).sort(), `hold ${i}`).toEqual([CompensateOutcome.COMPENSATED, CompensateOutcome.ALREADY_COMPENSATED]);
      backUnits += kept.get(i)!;
    }
    // A late confirm of a compensated hold replays CONFIRMED: it never deducts again.
    for (const i of back.slice(0, 5)) {
      const r = await b.client.confirm({ target: { case: 'holdId', value: holdIds[i]! } });
      expect([r.outcome, r.replayed]).toEqual([ConfirmOutcome.CONFIRMED, true]);
    }
    level = (await a.client.getStock({ couponId })).level!;
    expect([level.held, level.deducted, level.available]).toEqual([
      0n,
      BigInt(keptUnits - backUnits),
      BigInt(total - keptUnits + backUnits),
    ]);

    // Per-user counts: a user whose units are all back can take the full limit again; one still holding k
    // confirmed units can take exactly LIMIT - k (and not one more).
    const stillKept = (i: number) => (kept.has(i) && !back.includes(i) ? kept.get(i)! : 0);
    const after = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const over = await a.client.deduct({
          couponId,
          requestId: `over${i}`,
          userId: user(i),
          quantity: BigInt(LIMIT - stillKept(i) + 1),
        });
        const fit = await b.client.deduct({ couponId, requestId: `fit${i}`, userId: user(i), quantity: BigInt(LIMIT - stillKept(i)) });
        return [over.outcome, fit.outcome];
      }),
    );
    expect(after.filter(([o]) => o !== DeductOutcome.USER_LIMIT_EXCEEDED)).toEqual([]);
    expect(after.filter(([, f]) => f !== DeductOutcome.DEDUCTED)).toEqual([]);
    const fitUnits = Array.from({ length: N }, (_, i) => LIMIT - stillKept(i)).reduce((s, k) => s + k, 0);

    // MySQL: one DEDUCT row per confirmed hold (its kept units), one COMPENSATE per given back; exact.
    const rec = await settled(a.client, couponId);
    const ledger = await ledgerFigures(a.app, couponId);
    expect([ledger.deductRows, ledger.deductUnits]).toEqual([confirmed.length + N, keptUnits + fitUnits]);
    expect([ledger.compensateRows, ledger.compensateUnits, ledger.duplicates]).toEqual([back.length, backUnits, 0]);
    expect([rec.consistent, rec.redisDrift, rec.redisHeld, rec.settledRemaining]).toEqual([
      true,
      0n,
      0n,
      BigInt(total - keptUnits + backUnits - fitUnits),
    ]);
  }, 60_000);
});
