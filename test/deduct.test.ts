import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { shardRef } from '../src/domain/routing.js';
import { MoveSweeper } from '../src/domain/move-sweeper.js';
import { errOf, noReload } from './support/deduct-setup.js';
import { closeInstances, startInstancePair } from './support/instance-pair.js';
import { uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { runTs } from './support/processes.js';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  [a, b] = await startInstancePair();
});
afterAll(() => closeInstances(b, a));

interface LoadResult {
  outcomes: Record<string, number>;
  errors: Record<string, number>;
  deducted: string[];
}

describe('Deduct under concurrency', () => {
  it('when 5,000 Deducts from 3 processes race for 1,000 units on 16 shards, then exactly 1,000 succeed and every shard ends at 0', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 1000n, shardCount: 16 });
    const results = await Promise.all(
      [0, 1, 2].map((p) =>
        runTs<LoadResult>('test/support/deduct-load.ts', [
          JSON.stringify({
            addrs: [a.grpcAddr, b.grpcAddr],
            couponId: id,
            count: p === 0 ? 1668 : 1666,
            concurrency: 500,
            prefix: `p${p}`,
          }),
        ]),
      ),
    );
    const deducted = results.flatMap((r) => r.deducted);
    const soldOut = results.reduce((n, r) => n + (r.outcomes.SOLD_OUT ?? 0), 0);
    expect(results.map((r) => r.errors)).toEqual([{}, {}, {}]);
    expect(deducted.length).toBe(1000);
    expect(new Set(deducted).size).toBe(1000);
    expect(soldOut).toBe(4000);
    const s = await shardState(a.app, id);
    expect(s.levels.map((l) => l.available)).toEqual(new Array(16).fill(0));
    expect(s.inTransit).toBe(0);
    expect(s.net).toBe(1000);
    expect(s.outboxEvents).toBe(1000);
  });

  it('when 200 users each try 5 times at once on a coupon limited to 2 per user, then every user gets exactly 2', async () => {
    const id = uniqueId();
    // 640 units: 40 per shard, fewer than the ~25 users x 2 hashed to each shard, so fallback moves happen.
    await a.client.createCoupon({ couponId: id, totalStock: 640n, shardCount: 16, perUserLimit: 2 });
    const calls = [];
    for (let u = 0; u < 200; u++) {
      for (let k = 0; k < 5; k++) {
        const client = (u + k) % 2 ? a.client : b.client;
        calls.push(client.deduct({ couponId: id, requestId: `u${u}-k${k}`, userId: `user-${u}`, quantity: 1n }).then((r) => ({ u, r })));
      }
    }
    const all = await Promise.all(calls);
    const perUser = new Map<number, number>();
    for (const { u, r } of all) {
      if (r.outcome === DeductOutcome.DEDUCTED) perUser.set(u, (perUser.get(u) ?? 0) + 1);
      else expect(r.outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    }
    expect(perUser.size).toBe(200);
    expect([...perUser.values()].every((n) => n === 2)).toBe(true);
    const s = await shardState(a.app, id);
    expect(s.net).toBe(400);
    expect(s.available + s.inTransit).toBe(240);
  });

  it('when one request_id is sent 100 times at once, then one deduction is made and 99 replays return the same answer', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 4 });
    const rs = await Promise.all(
      Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).client.deduct({ couponId: id, requestId: 'same', userId: 'u1', quantity: 3n })),
    );
    expect(rs.every((r) => r.outcome === DeductOutcome.DEDUCTED)).toBe(true);
    expect(rs.filter((r) => !r.replayed).length).toBe(1);
    expect(new Set(rs.map((r) => `${r.remaining}/${r.shard}`)).size).toBe(1);
    const s = await shardState(a.app, id);
    expect(s.net).toBe(3);
    expect(s.outboxEvents).toBe(1);
  });

  it('when a request_id is reused with another user or quantity, then FAILED_PRECONDITION names the field and nothing changes', async () => {
    for (const limit of [0, 5]) {
      const id = uniqueId();
      await a.client.createCoupon({ couponId: id, totalStock: 50n, shardCount: 4, perUserLimit: limit });
      await a.client.deduct({ couponId: id, requestId: 'r', userId: 'alice', quantity: 2n });
      const otherUser = await errOf(b.client.deduct({ couponId: id, requestId: 'r', userId: 'bob', quantity: 2n }));
      expect(otherUser?.code).toBe(status.FAILED_PRECONDITION);
      expect(otherUser?.details).toMatch(/user_id/);
      const otherQty = await errOf(b.client.deduct({ couponId: id, requestId: 'r', userId: 'alice', quantity: 1n }));
      expect(otherQty?.code).toBe(status.FAILED_PRECONDITION);
      expect(otherQty?.details).toMatch(/quantity/);
      expect((await shardState(a.app, id)).net).toBe(2);
    }
  });

  it('when a request needs more than any single shard holds but within the total, then it succeeds; 7 units on 16 shards all sell', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 16 });
    const big = await a.client.deduct({ couponId: id, requestId: 'big', quantity: 50n });
    expect(big.outcome).toBe(DeductOutcome.DEDUCTED);
    const tooBig = await a.client.deduct({ couponId: id, requestId: 'too-big', quantity: 51n });
    expect(tooBig.outcome).toBe(DeductOutcome.INSUFFICIENT);
    const rest = await a.client.deduct({ couponId: id, requestId: 'rest', quantity: 50n });
    expect(rest.outcome).toBe(DeductOutcome.DEDUCTED);
    expect((await a.client.deduct({ couponId: id, requestId: 'after', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);

    const seven = uniqueId();
    await a.client.createCoupon({ couponId: seven, totalStock: 7n, shardCount: 16 });
    const rs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => a.client.deduct({ couponId: seven, requestId: `s${i}`, quantity: 1n })),
    );
    expect(rs.filter((r) => r.outcome === DeductOutcome.DEDUCTED).length).toBe(7);
    expect(rs.filter((r) => r.outcome === DeductOutcome.SOLD_OUT).length).toBe(13);
    const s = await shardState(a.app, seven);
    expect(s.available + s.inTransit).toBe(0);
  });

  it('when the coupon is sold out, then a replay of an earlier deduction still gets DEDUCTED and Restock on one instance reopens sales on the other', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 2n, shardCount: 2 });
    await a.client.deduct({ couponId: id, requestId: 'x1', quantity: 1n });
    await a.client.deduct({ couponId: id, requestId: 'x2', quantity: 1n });
    expect((await a.client.deduct({ couponId: id, requestId: 'x3', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
    expect((await b.client.deduct({ couponId: id, requestId: 'x4', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
    const fastBefore = b.app.deduct.stats.soldOutFastPath;
    expect((await b.client.deduct({ couponId: id, requestId: 'x5', quantity: 1n })).outcome).toBe(DeductOutcome.SOLD_OUT);
    expect(b.app.deduct.stats.soldOutFastPath).toBe(fastBefore + 1);
    const replay = await b.client.deduct({ couponId: id, requestId: 'x1', quantity: 1n });
    expect(replay).toMatchObject({ outcome: DeductOutcome.DEDUCTED, replayed: true });

    await a.client.restock({ couponId: id, quantity: 1n, requestId: 'rs' });
    // The NATS signal reaches b well within the flag's TTL (2 s): b must sell the restocked unit at once.
    const deadline = Date.now() + 1000;
    let r: Awaited<ReturnType<typeof b.client.deduct>>;
    do r = await b.client.deduct({ couponId: id, requestId: `after-${Date.now()}`, quantity: 1n });
    while (r.outcome !== DeductOutcome.DEDUCTED && Date.now() < deadline);
    expect(r.outcome).toBe(DeductOutcome.DEDUCTED);
  });
});

describe('Compensate', () => {
  it('when a deduction is compensated twice, then the units come back once; an unknown request_id is NOT_DEDUCTED', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 4, perUserLimit: 3 });
    await a.client.deduct({ couponId: id, requestId: 'd1', userId: 'u', quantity: 3n });
    expect((await a.client.deduct({ couponId: id, requestId: 'd2', userId: 'u', quantity: 1n })).outcome).toBe(
      DeductOutcome.USER_LIMIT_EXCEEDED,
    );
    const c1 = await b.client.compensate({ couponId: id, requestId: 'd1', reason: 'order cancelled' });
    expect(c1.outcome).toBe(CompensateOutcome.COMPENSATED);
    expect((await a.client.compensate({ couponId: id, requestId: 'd1' })).outcome).toBe(CompensateOutcome.ALREADY_COMPENSATED);
    expect((await a.client.compensate({ couponId: id, requestId: 'never' })).outcome).toBe(CompensateOutcome.NOT_DEDUCTED);
    // The user's count came back with the units.
    expect((await a.client.deduct({ couponId: id, requestId: 'd3', userId: 'u', quantity: 3n })).outcome).toBe(DeductOutcome.DEDUCTED);
    const s = await shardState(a.app, id);
    expect(s.net).toBe(3);
    expect(s.available).toBe(7);
    expect(s.outboxEvents).toBe(3);
  });

  it('when compensations race replays of the same deduction, then it is given back exactly once and never resurrected', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 2 });
    await a.client.deduct({ couponId: id, requestId: 'd', quantity: 2n });
    const race = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        i % 2
          ? a.client.compensate({ couponId: id, requestId: 'd' }).then((r) => r.outcome)
          : b.client.deduct({ couponId: id, requestId: 'd', quantity: 2n }).then((r) => (r.replayed ? 'replay' : 'fresh')),
      ),
    );
    expect(race.filter((o) => o === CompensateOutcome.COMPENSATED).length).toBe(1);
    expect(race.filter((o) => o === 'fresh').length).toBe(0);
    const s = await shardState(a.app, id);
    expect(s.net).toBe(0);
    expect(s.available).toBe(5);
  });

  it('when compensations race deductions, then units are conserved: deducted - compensated + available = total', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 300n, shardCount: 8 });
    let compensated = 0;
    let deducted = 0;
    // Waves of deductions, each racing the compensations of the previous wave's successes.
    let previous: string[] = [];
    for (let wave = 0; wave < 12; wave++) {
      const succeeded: string[] = [];
      const give = previous.filter((_, i) => i % 3 === 0);
      await Promise.all([
        ...Array.from({ length: 50 }, async (_, i) => {
          const rid = `w${wave}-${i}`;
          const r = await (i % 2 ? a : b).client.deduct({ couponId: id, requestId: rid, quantity: 1n });
          if (r.outcome === DeductOutcome.DEDUCTED) {
            deducted++;
            succeeded.push(rid);
          }
        }),
        ...give.map(async (rid, i) => {
          const cr = await (i % 2 ? b : a).client.compensate({ couponId: id, requestId: rid });
          if (cr.outcome === CompensateOutcome.COMPENSATED) compensated++;
        }),
      ]);
      previous = succeeded;
    }
    const s = await shardState(a.app, id);
    expect(compensated).toBeGreaterThan(0);
    expect(deducted).toBeGreaterThan(300);
    expect(s.net).toBe(deducted - compensated);
    expect(deducted - compensated + s.available + s.inTransit).toBe(300);
    expect(s.outboxEvents).toBe(deducted + compensated);
  });
});

describe('fallback moves', () => {
  it('when a mover dies between taking units out and landing them, then the sweeper lands them: nothing created or lost', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 40n, shardCount: 4 });
    const coupon = (await a.app.repo.find(id))!;
    // Step 1 of a move, then "crash": the target is never credited and the move never acknowledged.
    expect(await a.app.store.moveOut(shardRef(coupon, 1), 'dead-mover/0/1>0', 0, 7)).toBe(7);
    expect(await a.app.store.moveOut(shardRef(coupon, 2), 'dead-mover/0/2>0', 0, 4)).toBe(4);
    let s = await shardState(a.app, id);
    expect(s.inTransit).toBe(11);
    expect(s.available + s.inTransit).toBe(40);
    // Replaying step 1 with the same move id takes nothing more.
    expect(await a.app.store.moveOut(shardRef(coupon, 1), 'dead-mover/0/1>0', 0, 7)).toBe(7);
    const sweeper = new MoveSweeper(a.app.store, noReload, 0);
    expect(await sweeper.sweep(coupon)).toBe(2);
    s = await shardState(a.app, id);
    expect(s.inTransit).toBe(0);
    expect(s.pendingMoves).toBe(0);
    expect(s.levels.map((l) => l.available)).toEqual([21, 3, 6, 10]);
    // A late credit from the dead mover (same move id) is ignored.
    expect(await a.app.store.credit(shardRef(coupon, 0), 'M:dead-mover/0/1>0', 7)).toBe('already');
    expect((await shardState(a.app, id)).available).toBe(40);
  });

  it('when a process serving fallback-heavy load is SIGKILLed mid-run, then after the sweep the units still add up', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 3000n, shardCount: 16 });
    const { spawnTs } = await import('./support/processes.js');
    const child = spawnTs('test/support/serve-and-load.ts', [JSON.stringify({ namespace: a.namespace, couponId: id, count: 6000 })], {});
    let progress = 0;
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => {
        progress += d
          .toString()
          .split('\n')
          .filter((l) => l.startsWith('tick')).length;
        if (progress >= 3) resolve();
      });
      child.once('exit', (code) => reject(new Error(`load process exited early (${code})`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    let s = await shardState(a.app, id);
    expect(s.net).toBeGreaterThan(0);
    // Really dead: nothing moves any more.
    await new Promise((r) => setTimeout(r, 300));
    expect((await shardState(a.app, id)).net).toBe(s.net);
    // Units are either available, in transit, or deducted (counted in net) — or landed but not yet acked,
    // which counts them twice until the sweeper acknowledges the move.
    expect(s.available + s.inTransit + s.net).toBeGreaterThanOrEqual(3000);
    const coupon = (await a.app.repo.find(id))!;
    const sweeper = new MoveSweeper(a.app.store, noReload, 0);
    await sweeper.sweep(coupon);
    s = await shardState(a.app, id);
    expect(s.inTransit).toBe(0);
    expect(s.pendingMoves).toBe(0);
    expect(s.available + s.net).toBe(3000);
    // quantity 3 per deduction
    expect(s.outboxEvents * 3).toBe(s.net);
  });
});

describe('Deduct bad input', () => {
  it('when input is bad, then INVALID_ARGUMENT or NOT_FOUND names it and the stock is untouched', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2, perUserLimit: 1 });
    const cases: [object, number, RegExp][] = [
      [{ couponId: id, requestId: '', userId: 'u' }, status.INVALID_ARGUMENT, /request_id/],
      [{ couponId: id, requestId: 'x'.repeat(129), userId: 'u' }, status.INVALID_ARGUMENT, /request_id/],
      [{ couponId: id, requestId: 'bad id', userId: 'u' }, status.INVALID_ARGUMENT, /request_id/],
      [{ couponId: id, requestId: 'r', userId: 'u', quantity: -1n }, status.INVALID_ARGUMENT, /quantity/],
      [{ couponId: id, requestId: 'r', userId: 'u', quantity: 101n }, status.INVALID_ARGUMENT, /quantity/],
      [{ couponId: id, requestId: 'r', userId: 'u', quantity: 2n ** 62n }, status.INVALID_ARGUMENT, /quantity/],
      [{ couponId: id, requestId: 'r' }, status.INVALID_ARGUMENT, /user_id/],
      [{ couponId: id, requestId: 'r', userId: 'ü' }, status.INVALID_ARGUMENT, /user_id/],
      [{ couponId: '', requestId: 'r', userId: 'u' }, status.INVALID_ARGUMENT, /coupon_id/],
      [{ couponId: uniqueId(), requestId: 'r', userId: 'u' }, status.NOT_FOUND, /does not exist/],
    ];
    for (const [req, want, msg] of cases) {
      const e = await errOf(a.client.deduct(req));
      expect(
        e?.code,
        JSON.stringify(req, (_, v) => (typeof v === 'bigint' ? String(v) : v)),
      ).toBe(want);
      expect(e?.details).toMatch(msg);
    }
    const ce = await errOf(a.client.compensate({ couponId: id, requestId: 'r', reason: 'a\u0000b' }));
    expect(ce?.code).toBe(status.INVALID_ARGUMENT);
    expect(ce?.details).toMatch(/reason/);
    const s = await shardState(a.app, id);
    expect(s.available).toBe(10);
    expect(s.outboxEvents).toBe(0);
  });

  // A 1 ms deadline may expire before the server starts the call (then nothing runs: the domain checks its
  // signal first, see test/domain/deduct.test.ts) or just after its one atomic script ran. Either way the call
  // is DEADLINE_EXCEEDED, nothing is half done, and a retry with the same id settles which it was. (On a busy
  // machine the answer can also be read before the client's 1 ms timer fires: then it is the one deduction.)
  it('when the deadline runs out at once, then the call is DEADLINE_EXCEEDED and at most its one deduction was made, which a retry replays', async () => {
    const id = uniqueId();
    await a.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const answered = await a.client.deduct({ couponId: id, requestId: 'late' }, { deadlineMs: 1 }).then(
      (r) => `outcome ${DeductOutcome[r.outcome]}`,
      (err: { code?: number }) => `status ${status[err.code ?? -1]}`,
    );
    expect(['status DEADLINE_EXCEEDED', 'outcome DEDUCTED']).toContain(answered);
    await new Promise((r) => setTimeout(r, 50));
    const made = (await shardState(a.app, id)).net;
    expect(answered === 'outcome DEDUCTED' ? [1] : [0, 1]).toContain(made);
    const retry = await a.client.deduct({ couponId: id, requestId: 'late' });
    expect(retry.outcome).toBe(DeductOutcome.DEDUCTED);
    expect(retry.replayed).toBe(made === 1);
    expect((await shardState(a.app, id)).net).toBe(1);
  });
});
