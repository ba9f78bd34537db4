// Attack on group commit (src/redis/shard-batcher.ts, lua/shard-batch-8.lua): the Redis connections of the
// instance are killed (CLIENT KILL ID on every master, over and over) while batches that mix Deducts, a
// Compensate of the same request id, duplicate ids and a per-user limit at its edge are in flight. A batch
// whose connection closed may have run or not; whatever the client or the batcher sends again must be
// answered as a replay. Every caller retries an unknown outcome with the same request id, as a client does.
// Exact: DEDUCT rows == request ids answered DEDUCTED, COMPENSATE rows == ids answered COMPENSATED, no id
// twice, no user above the limit, Redis and MySQL agree.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, ConfirmOutcome, DeductOutcome, ReleaseOutcome, ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled, sleep } from './support/settlement.js';

let a: TestApp;
const admins: Redis[] = [];
beforeAll(async () => {
  // sweep: a fallback move whose connection was killed after its move-out leaves units in transit; the move
  // sweeper brings them back (without it, Deducts wait for them and end ABORTED, retried forever).
  // relay claim idle: out of reach, so that no claim rescues outbox entries a killed read delivered to this
  // instance's relay without its knowing (the relay must re-read its own pending list; before it did, those
  // entries waited the 15 s default, and settlement with them).
  a = await startTestApp({
    SHARDSTOCK_WORKERS: 'relay,settle,sweep',
    SHARDSTOCK_SWEEP_INTERVAL_MS: '300',
    SHARDSTOCK_INSTANCE_ID: 'atk-batch',
    SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '600000',
  });
  for (const node of a.app.redis.nodes('master'))
    admins.push(new Redis({ host: node.options.host, port: node.options.port, lazyConnect: false }));
});
afterAll(async () => {
  for (const r of admins) r.disconnect();
  await a?.close();
});

/** Kills this instance's own connection to every master (never another process's), until stopped. `started`:
 * once the first connection was killed, so that calls sent after it meet the kills. */
function killer() {
  let on = true;
  let kills = 0;
  let firstKill: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    firstKill = resolve;
  });
  const done = (async () => {
    while (on) {
      await Promise.all(
        a.app.redis.nodes('master').map(async (node) => {
          const id = await node.client('ID').catch(() => null);
          const admin = admins.find((r) => r.options.port === node.options.port);
          if (id !== null && admin) kills += Number(await admin.client('KILL', 'ID', String(id)).catch(() => 0));
        }),
      );
      if (kills > 0) firstKill();
      await sleep(5 + Math.random() * 25);
    }
    firstKill();
  })();
  return {
    started,
    async stop() {
      on = false;
      await done;
      return kills;
    },
  };
}

/** Calls until the outcome is known: an error (UNAVAILABLE, DEADLINE_EXCEEDED) is an unknown outcome. */
const errors: string[] = [];
async function known<T>(call: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await call();
    } catch (err) {
      errors.push(String((err as Error).message));
      if (i > 200) throw err;
      await sleep(20);
    }
  }
}

describe('attack: connections killed under group commit', () => {
  it('when the master connections are killed again and again while mixed batches run, then no deduction is doubled or lost and every answer holds', async () => {
    const free = uniqueId('abf');
    const lim = uniqueId('abl');
    const TOTAL = 300;
    const LIMIT = 3;
    await a.client.createCoupon({ couponId: free, totalStock: BigInt(TOTAL), shardCount: 4 });
    await a.client.createCoupon({ couponId: lim, totalStock: 1000n, shardCount: 4, perUserLimit: LIMIT });
    const resentBefore = a.app.store.batchStats().batchResent;
    const kill = killer();
    const deduct = (couponId: string, requestId: string, userId = '', quantity = 1n) =>
      known(() => a.client.deduct({ couponId, requestId, userId, quantity }, { deadlineMs: 5_000 }));
    const compensate = (couponId: string, requestId: string) =>
      known(() => a.client.compensate({ couponId, requestId, reason: 'atk' }, { deadlineMs: 5_000 }));

    // Free coupon: 500 ids for 300 units, each sent twice at once; every 5th also compensated at once.
    const ids = Array.from({ length: 500 }, (_, i) => `f${i}`);
    const freeCalls = ids.map((id, i) =>
      Promise.all([deduct(free, id), deduct(free, id), i % 5 === 0 ? compensate(free, id) : Promise.resolve(null)]),
    );
    // Limited coupon: 60 users each try 5 requests of 1 unit (limit 3), each request sent twice.
    const users = Array.from({ length: 60 }, (_, u) => `lu${u}`);
    const limCalls = users.flatMap((u) =>
      Array.from({ length: 5 }, (_, k) =>
        Promise.all([deduct(lim, `${u}-${k}`, u), deduct(lim, `${u}-${k}`, u)]).then((rs) => ({ u, rs })),
      ),
    );
    // The kills stop after a while: from then on every call must get its answer.
    const stopped = sleep(3_000).then(() => kill.stop());
    const [freeAnswers, limAnswers] = await Promise.all([Promise.all(freeCalls), Promise.all(limCalls)]);
    const kills = await stopped;
    expect(kills).toBeGreaterThan(0);
    // The kills cut calls short (otherwise the test proved nothing): their callers retried, or the batcher sent
    // their batch again and the callers never saw it.
    expect(errors.length + a.app.store.batchStats().batchResent - resentBefore).toBeGreaterThan(0);

    // Free coupon (twins may differ: one refused, the other deducted after a compensation freed a unit).
    const deducted = new Set<string>();
    const compensated = new Set<string>();
    for (const [i, [d1, d2, c]] of freeAnswers.entries()) {
      if (d1.outcome === DeductOutcome.DEDUCTED || d2.outcome === DeductOutcome.DEDUCTED) deducted.add(ids[i]!);
      // ALREADY_COMPENSATED for the only Compensate of an id: its first try gave the units back, its answer
      // was lost with the connection, the retry found it done.
      if (c?.outcome === CompensateOutcome.COMPENSATED || c?.outcome === CompensateOutcome.ALREADY_COMPENSATED) compensated.add(ids[i]!);
    }
    // A compensation only ever gives back a deduction that was answered.
    for (const id of compensated) expect(deducted.has(id), id).toBe(true);
    // All units went (500 ids for 300 units, what came back was taken again by later ids).
    expect(deducted.size - compensated.size).toBeLessThanOrEqual(TOTAL);

    // Limited coupon: exactly LIMIT requests per user (the stock is ample), twins agree.
    const perUser = new Map<string, number>();
    const limDeducted = new Set<string>();
    for (const [j, { u, rs }] of limAnswers.entries()) {
      const ok = rs.map((r) => r.outcome === DeductOutcome.DEDUCTED);
      expect(ok[0], `${u} request ${j % 5}`).toBe(ok[1]);
      if (ok[0]) {
        perUser.set(u, (perUser.get(u) ?? 0) + 1);
        limDeducted.add(`${u}-${j % 5}`);
      } else for (const r of rs) expect(r.outcome).toBe(DeductOutcome.USER_LIMIT_EXCEEDED);
    }
    expect([...perUser.values()]).toEqual(Array(users.length).fill(LIMIT));

    // Redis, then MySQL, to the unit.
    const f = (await known(() => a.client.getStock({ couponId: free }))).level!;
    expect([f.deducted, f.available]).toEqual([BigInt(deducted.size - compensated.size), BigInt(TOTAL - deducted.size + compensated.size)]);
    const l = (await known(() => a.client.getStock({ couponId: lim }))).level!;
    expect(l.deducted).toBe(BigInt(users.length * LIMIT));
    const [rf, rl] = await Promise.all([settled(a.client, free), settled(a.client, lim)]);
    const [lf, ll] = await Promise.all([ledgerFigures(a.app, free), ledgerFigures(a.app, lim)]);
    expect([lf.deductRows, lf.compensateRows, lf.duplicates, lf.remaining]).toEqual([
      deducted.size,
      compensated.size,
      0,
      TOTAL - deducted.size + compensated.size,
    ]);
    const rows = await a.app.orm.em
      .fork()
      .execute<{ request_id: string }[]>("select request_id from stock_ledger where coupon_id = ? and kind = 'DEDUCT'", [free]);
    expect(rows.map((r) => r.request_id).sort()).toEqual([...deducted].sort());
    expect([ll.deductRows, ll.duplicates]).toEqual([limDeducted.size, 0]);
    expect([rf.consistent, rf.redisDrift, rl.consistent, rl.redisDrift]).toEqual([true, 0n, true, 0n]);
  }, 60_000);

  it('when the master connections are killed again and again while holds are taken (with fallbacks), confirmed and released, then exactly the stock is held, each hold ends once, and the ledger has one row per confirmed hold', async () => {
    const couponId = uniqueId('abh');
    const TOTAL = 120;
    await a.client.createCoupon({ couponId, totalStock: BigInt(TOTAL), shardCount: 4 });
    errors.length = 0;
    const resentBefore = a.app.store.batchStats().batchResent;
    let kill = killer();
    let stopped = sleep(2_000).then(() => kill.stop());
    await kill.started;
    // 200 Reserves of one unit for 120 units: the shards run dry unevenly, so later ones fall back.
    const reserved = await Promise.all(
      Array.from({ length: 200 }, (_, i) => known(() => a.client.reserve({ couponId, requestId: `r${i}`, quantity: 1n, ttlMs: 60_000 }))),
    );
    let kills = await stopped;
    const held = reserved.filter((r) => r.outcome === ReserveOutcome.HELD).map((r) => r.hold!.holdId);
    expect(held).toHaveLength(TOTAL);
    expect(new Set(held).size).toBe(TOTAL);
    expect((await known(() => a.client.getStock({ couponId }))).level!.held).toBe(BigInt(TOTAL));

    kill = killer();
    stopped = sleep(2_000).then(() => kill.stop());
    await kill.started;
    const ends = await Promise.all(
      held.map((holdId, i) =>
        i % 2
          ? known(() => a.client.confirm({ target: { case: 'holdId', value: holdId } })).then((r) => r.outcome === ConfirmOutcome.CONFIRMED)
          : known(() => a.client.release({ target: { case: 'holdId', value: holdId } })).then((r) => {
              expect([ReleaseOutcome.RELEASED, ReleaseOutcome.ALREADY_RELEASED]).toContain(r.outcome);
              return false;
            }),
      ),
    );
    kills += await stopped;
    expect(kills).toBeGreaterThan(0);
    // The kills cut calls short (otherwise the test proved nothing): their callers retried, or, for Reserves in
    // the group commit, the batcher sent their batch again and the callers never saw it.
    expect(errors.length + a.app.store.batchStats().batchResent - resentBefore).toBeGreaterThan(0);
    const confirmed = ends.filter(Boolean).length;
    expect(confirmed).toBe(TOTAL / 2);
    const level = (await known(() => a.client.getStock({ couponId }))).level!;
    expect([level.held, level.deducted, level.available]).toEqual([0n, BigInt(confirmed), BigInt(TOTAL - confirmed)]);
    const rec = await settled(a.client, couponId);
    const fig = await ledgerFigures(a.app, couponId);
    expect([fig.deductRows, fig.deductUnits, fig.duplicates, fig.remaining]).toEqual([confirmed, confirmed, 0, TOTAL - confirmed]);
    expect([rec.consistent, rec.redisDrift, rec.redisHeld]).toEqual([true, 0n, 0n]);
  }, 40_000);
});
