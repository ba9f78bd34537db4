// Group commit per shard (shard-batch-8.lua, src/redis/shard-batcher.ts): requests that share one Lua call must
// get exactly what they would have got alone. Each batch below is run twice on twin shards with the same
// starting state: once as ONE batch call, once as single calls (deduct-7.lua, compensate-6.lua,
// hold-reserve-7.lua) in the same order. Replies and the shards' end state must be identical; a hold's expiry,
// taken from the server's clock, is only required to be its TTL from about now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome, ReserveOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import type { ShardRef } from '../src/domain/ports.js';
import { homeShard } from '../src/domain/routing.js';
import { RedisHoldStore } from '../src/redis/hold-store.js';
import { RedisStockStore } from '../src/redis/stock-store.js';
import { fromOutboxEntry } from '../src/settlement/event.js';
import { type BatchOp, type BatchReply, Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { ledgerFigures, settled } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle,sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '500' });
});
afterAll(async () => {
  await a?.close();
});

const scripts = () => new Scripts(a.app.redis, a.namespace, a.app.config.idempotencyWindowS);

async function twinShards(stock: number): Promise<[ShardRef, ShardRef]> {
  const id = uniqueId();
  const one = { couponId: id, index: 0, tag: `${id}#0.0` };
  const two = { couponId: id, index: 0, tag: `${id}#0.1` };
  for (const s of [one, two]) await scripts().shardInit(s, stock, 0);
  return [one, two];
}

const D = (requestId: string, userId = '', quantity = 1, perUserLimit = 0): BatchOp => ({
  op: 'D',
  input: { requestId, userId, quantity, perUserLimit },
});
const C = (requestId: string, limited = false): BatchOp => ({ op: 'C', requestId, reason: 'refund', limited });
const TTL_MS = 60_000;
const R = (requestId: string, userId = '', quantity = 1, perUserLimit = 0): BatchOp => ({
  op: 'R',
  input: { requestId, userId, quantity, perUserLimit, ttlMs: TTL_MS },
});

/** The hold scripts alone (no group commit): hold-reserve-7.lua, and hold-confirm-7.lua for a `before` step. */
const holdsAlone = () => new RedisHoldStore(a.app.redis, { namespace: a.namespace, idempotencyWindowS: a.app.config.idempotencyWindowS });

async function alone(s: Scripts, shard: ShardRef, op: BatchOp): Promise<BatchReply> {
  try {
    if (op.op === 'D') return await s.deduct(shard, op.input, [], '', 1);
    if (op.op === 'R') return await holdsAlone().reserve(shard, op.input, []);
    return await s.compensate(shard, op.requestId, op.reason, op.limited);
  } catch (err) {
    return err as Error;
  }
}

/** What a shard holds: level, user counts, outbox events (kind and request id, in order), open holds. */
async function stateOf(shard: ShardRef) {
  const k = scripts().keys(shard);
  const events = (await a.app.redis.xrange(k.outbox, '-', '+')).flatMap(([, f]) =>
    fromOutboxEntry(f).map((e) => `${e.event?.kind}:${e.event?.requestId}`),
  );
  const holds = (await a.app.redis.zrange(k.holds, '0', '-1')).sort();
  return { shard: await a.app.redis.hgetall(k.shard), users: await a.app.redis.hgetall(k.users), events, holds };
}

/** A reply with a new hold's expiry checked (TTL_MS from about now) and then left out of the comparison. */
function withoutExpiry(r: BatchReply): BatchReply {
  if (r instanceof Error || !('expiresAtMs' in r) || r.expiresAtMs === undefined) return r;
  expect(Math.abs(r.expiresAtMs - (Date.now() + TTL_MS))).toBeLessThan(10_000);
  const { expiresAtMs: _, ...rest } = r;
  return rest;
}

/** Runs `ops` as one batch on one twin and one by one on the other; returns the batch's replies. */
async function sameAsAlone(ops: BatchOp[], stock: number, before: (BatchOp | ((shard: ShardRef) => Promise<unknown>))[] = []) {
  const [batched, single] = await twinShards(stock);
  const s = scripts();
  for (const op of before) {
    for (const shard of [batched, single]) await (typeof op === 'function' ? op(shard) : alone(s, shard, op));
  }
  const replies = await s.shardBatch(batched, ops, false);
  const expected: BatchReply[] = [];
  for (const op of ops) expected.push(await alone(s, single, op));
  expect(replies.map(kindOf)).toEqual(expected.map(kindOf));
  const answers = (list: BatchReply[]) => list.filter((r) => !(r instanceof Error)).map(withoutExpiry);
  expect(answers(replies)).toEqual(answers(expected));
  const state = await stateOf(batched);
  expect(state).toEqual(await stateOf(single));
  return { replies, state };
}

const kindOf = (r: BatchReply) => (r instanceof Error ? 'error' : r.kind);

describe('group commit: a batch answers as single calls would', () => {
  it('when a batch holds one request, then it is deducted as alone', async () => {
    expect((await sameAsAlone([D('one')], 5)).replies.map(kindOf)).toEqual(['deducted']);
  });

  it('when a batch of 2 holds the same request id twice, then one is DEDUCTED and one is a replay: never two deductions', async () => {
    const { replies } = await sameAsAlone([D('twice', 'u1', 2), D('twice', 'u1', 2)], 5);
    expect(replies).toEqual([
      { kind: 'deducted', remaining: 3 },
      { kind: 'replay', remaining: 3, compensated: false },
    ]);
  });

  it('when a batch of 64 mixes new requests, replays, twins, a per-user limit reached mid-batch, compensations, conflicts, a failing request and stock running out, then every reply and the end state match single calls', async () => {
    const before = [D('old1', 'ua'), D('old2', 'ub', 2), D('gone', 'uc')];
    const ops: BatchOp[] = [
      D('old1', 'ua'), // replay of an earlier deduction
      C('old2'), // compensated inside the batch
      D('old2', 'ub', 2), // replay of the compensated one
      D('new0', 'u0'),
      D('new0', 'u0'), // the same id twice in one batch
      D('new0', 'u9'), // and reused by another user: conflict
      D('new0', 'u0', 3), // and with another quantity: conflict
      // A limit of 3 reached mid-batch: the 4th and 5th are refused, the one after a compensation fits again.
      D('lim1', 'ul', 1, 3),
      D('lim2', 'ul', 1, 3),
      D('lim3', 'ul', 1, 3),
      D('lim4', 'ul', 1, 3),
      D('lim5', 'ul', 1, 3),
      C('lim2', true),
      D('lim6', 'ul', 1, 3),
      // A deduct and a compensate of the same request, both orders.
      D('dc', 'ud'),
      C('dc'),
      C('cd'),
      D('cd', 'ud'),
      C('never'), // nothing to compensate
      C('gone'),
      C('gone'), // already compensated
      { op: 'D', input: { requestId: 'broken', userId: 'ux', quantity: 'x' as unknown as number, perUserLimit: 2 } }, // its own error
    ];
    for (let i = 0; ops.length < 60; i++) ops.push(D(`fill${i}`, `f${i % 7}`));
    // Stock runs out before the end: the last ones are short (and would fall back in the service).
    ops.push(D('big', 'uz', 4), D('last1', 'uz'), D('last2', 'uz'), D('last1', 'uz'));
    expect(ops).toHaveLength(64);
    const { replies } = await sameAsAlone(ops, 46, before);
    const kinds = replies.map(kindOf);
    expect(kinds.slice(0, 7)).toEqual(['replay', 'compensated', 'replay', 'deducted', 'replay', 'conflict', 'conflict']);
    expect(kinds.slice(7, 14)).toEqual(['deducted', 'deducted', 'deducted', 'user_limit', 'user_limit', 'compensated', 'deducted']);
    expect(kinds.slice(14, 21)).toEqual(['deducted', 'compensated', 'not_deducted', 'deducted', 'not_deducted', 'compensated', 'already']);
    expect(kinds[21]).toBe('error');
    expect(kinds).toContain('short');
  });

  it('when a batch holds one Reserve, then it is held as alone: units out of avail into held, one open hold, no outbox event', async () => {
    const { replies, state } = await sameAsAlone([R('h1', 'u1', 2)], 5);
    expect(replies.map(withoutExpiry)).toEqual([{ kind: 'deducted', remaining: 3 }]);
    expect([state.shard.avail, state.shard.held, state.holds, state.events]).toEqual(['3', '2', ['h1|u1'], []]);
  });

  it('when a batch of 2 holds the same Reserve twice, then one hold is made and the other replays it: never two holds', async () => {
    const { replies } = await sameAsAlone([R('twice', 'u1', 2), R('twice', 'u1', 2)], 5);
    expect(replies.map(withoutExpiry)).toEqual([
      { kind: 'deducted', remaining: 3 },
      { kind: 'replay', remaining: 3, compensated: false },
    ]);
  });

  it('when a batch of 64 mixes Reserves with Deducts and Compensates (replays of held and confirmed holds, twins, ids of the other kind, a limit shared by holds and deductions reached mid-batch, a hold length that is no number, stock running out), then every reply and the end state match single calls', async () => {
    const confirm = (requestId: string) => (shard: ShardRef) => holdsAlone().confirm(shard, requestId, 0);
    const before = [R('held', 'ua', 2), R('kept', 'ub'), confirm('kept'), D('dd', 'uc')];
    const ops: BatchOp[] = [
      R('held', 'ua', 2), // replay of an open hold
      R('kept', 'ub'), // replay of a confirmed hold
      R('held', 'ux', 2), // another user: conflict
      R('held', 'ua', 3), // another quantity: conflict
      R('dd', 'uc'), // a Deduct's id: conflict (kind)
      C('held'), // a hold is no deduction: not deducted
      C('kept'), // a confirmed hold is: compensated
      R('new', 'ud'),
      R('new', 'ud'), // the same id twice in one batch
      D('new', 'ud'), // a Reserve's id used by a Deduct in the same batch: conflict (kind)
      R('dnew', 'ud'),
      D('dfirst', 'ue'),
      R('dfirst', 'ue'), // a Deduct's id used by a Reserve in the same batch: conflict (kind)
      // A limit of 3 shared by holds and deductions, reached mid-batch.
      R('l1', 'ul', 1, 3),
      D('l2', 'ul', 1, 3),
      R('l3', 'ul', 1, 3),
      R('l4', 'ul', 1, 3),
      D('l5', 'ul', 1, 3),
      C('l2', true), // gives one unit of the limit back
      R('l6', 'ul', 1, 3),
      { op: 'R', input: { requestId: 'broken', userId: 'uy', quantity: 'x' as unknown as number, perUserLimit: 2, ttlMs: TTL_MS } }, // its own error
      // A hold's length that is no number: its own error, before anything of the run is written.
      { op: 'R', input: { requestId: 'nolength', userId: 'uy', quantity: 1, perUserLimit: 0, ttlMs: Number.NaN } },
    ];
    for (let i = 0; ops.length < 60; i++) ops.push(i % 2 === 0 ? R(`fill${i}`, `f${i % 5}`) : D(`fill${i}`, `f${i % 5}`));
    // Stock runs out before the end: the last ones are short (and would fall back in the service).
    ops.push(R('big', 'uz', 4), R('last1', 'uz'), D('last2', 'uz'), R('last1', 'uz'));
    expect(ops).toHaveLength(64);
    const { replies, state } = await sameAsAlone(ops, 48, before);
    const kinds = replies.map(kindOf);
    expect(kinds.slice(0, 7)).toEqual(['replay', 'replay', 'conflict', 'conflict', 'conflict', 'not_deducted', 'compensated']);
    expect(kinds.slice(7, 13)).toEqual(['deducted', 'replay', 'conflict', 'deducted', 'deducted', 'conflict']);
    expect(kinds.slice(13, 20)).toEqual(['deducted', 'deducted', 'deducted', 'user_limit', 'user_limit', 'compensated', 'deducted']);
    expect(kinds.slice(20, 22)).toEqual(['error', 'error']);
    expect(kinds).toContain('short');
    // Every hold made (before or in the batch) and not confirmed is open, its units in `held`.
    const made = ops.filter((o, i) => o.op === 'R' && kinds[i] === 'deducted');
    expect(state.holds).toHaveLength(1 + made.length);
    expect(Number(state.shard.held)).toBe(2 + made.reduce((n, o) => n + (o.op === 'R' ? o.input.quantity : 0), 0));
    expect(Number(state.shard.avail)).toBeGreaterThanOrEqual(0);
  });
});

/** A 10-unit coupon of 2 shards and eight request ids whose home is shard 0 (five units there): sent together,
 * they share batch calls, and the three it leaves short fall back to shard 1. */
async function eightHomedOnAShardOfFive(prefix: string) {
  const couponId = uniqueId();
  await a.client.createCoupon({ couponId, totalStock: 10n, shardCount: 2 });
  const coupon = (await a.app.repo.find(couponId))!;
  const ids: string[] = [];
  for (let i = 0; ids.length < 8; i++) if (homeShard(coupon, `${prefix}${i}`, '') === 0) ids.push(`${prefix}${i}`);
  return { couponId, ids };
}

/** From now: fallbacks, requests sent in group-commit calls, and whether those calls were fewer than their
 * requests (a fallback's own call carries credits and goes alone, outside the batches). */
function batchCounters() {
  const sizes = a.app.metrics.shardBatchSize.child();
  const [calls, requests, fallbacks] = [sizes.count, sizes.sum, a.app.deduct.stats.fallbacks];
  return () => ({
    fallbacks: a.app.deduct.stats.fallbacks - fallbacks,
    batched: sizes.sum - requests,
    fewerCallsThanRequests: sizes.count - calls > 0 && sizes.count - calls < sizes.sum - requests,
  });
}

describe('group commit through the service', () => {
  it('when a deadline passes while a request waits for its batch, then it is dropped from the batch and its neighbours are served', async () => {
    const [shard] = await twinShards(10);
    const store = new RedisStockStore(a.app.redis, {
      namespace: a.namespace,
      idempotencyWindowS: a.app.config.idempotencyWindowS,
      batch: { max: 64, waitUs: 0 },
    });
    const gone = new AbortController();
    const calls = [
      store.deduct(shard, { requestId: 'b1', userId: '', quantity: 1, perUserLimit: 0 }, []),
      store.deduct(shard, { requestId: 'late', userId: '', quantity: 1, perUserLimit: 0 }, [], '', gone.signal),
      store.deduct(shard, { requestId: 'b2', userId: '', quantity: 1, perUserLimit: 0 }, []),
    ];
    gone.abort(); // before the batch is sent at the end of this event-loop turn
    const [b1, late, b2] = await Promise.allSettled(calls);
    expect(b1).toMatchObject({ status: 'fulfilled', value: { kind: 'deducted' } });
    expect(b2).toMatchObject({ status: 'fulfilled', value: { kind: 'deducted', remaining: 8 } });
    expect(late).toMatchObject({ status: 'rejected', reason: { kind: 'deadline_exceeded' } });
    expect(await scripts().recordRead(shard, 'late')).toBeNull();
  });

  it('when a batch on one shard runs out of stock, then the requests it leaves short fall back to the other shard exactly as alone', async () => {
    const { couponId, ids } = await eightHomedOnAShardOfFive('fb');
    const counted = batchCounters();
    const answers = await Promise.all(ids.map((requestId) => a.client.deduct({ couponId, requestId, quantity: 1n })));
    expect(answers.map((r) => [r.outcome, r.replayed])).toEqual(Array(8).fill([DeductOutcome.DEDUCTED, false]));
    expect(answers.filter((r) => r.shard === 0)).toHaveLength(8);
    expect(counted()).toEqual({ fallbacks: 3, batched: 8, fewerCallsThanRequests: true });
    const s = await shardState(a.app, couponId);
    expect([s.available + s.inTransit, s.net]).toEqual([2, 8]);
    expect(s.levels.every((l) => (l.available ?? -1) >= 0)).toBe(true);
  });

  it('when 600 concurrent Deducts (100 ids sent twice) and Compensates race for 150 units over 3 shards, then successes == stock, nothing goes negative, batches were formed, and after settlement ledger rows == successes', async () => {
    const couponId = uniqueId();
    await a.client.createCoupon({ couponId, totalStock: 150n, shardCount: 3 });
    const ids = Array.from({ length: 500 }, (_, i) => `c${i}`);
    const calls = [...ids, ...ids.slice(0, 100)].map((requestId) => a.client.deduct({ couponId, requestId, quantity: 1n }));
    const answers = await Promise.all(calls);
    const first = answers.filter((r) => r.outcome === DeductOutcome.DEDUCTED && !r.replayed).length;
    const replays = answers.filter((r) => r.outcome === DeductOutcome.DEDUCTED && r.replayed).length;
    expect(first).toBe(150);
    // Every twin of a successful id replays it; of a refused one, is refused too (or finds it deducted since).
    const won = new Set(ids.filter((_, i) => answers[i]!.outcome === DeductOutcome.DEDUCTED));
    expect(replays).toBe(ids.slice(0, 100).filter((id) => won.has(id)).length);
    // Give back 30 of them while new ones race for the units that come back.
    const back = [...won].slice(0, 30);
    const more = Array.from({ length: 60 }, (_, i) => `m${i}`);
    const [comp, again] = await Promise.all([
      Promise.all(back.map((requestId) => a.client.compensate({ couponId, requestId, reason: 'refund' }))),
      Promise.all(more.map((requestId) => a.client.deduct({ couponId, requestId, quantity: 1n }))),
    ]);
    expect(comp.every((c) => c.outcome === 1)).toBe(true);
    const late = again.filter((r) => r.outcome === DeductOutcome.DEDUCTED).length;
    expect(late).toBeLessThanOrEqual(30);
    const s = await shardState(a.app, couponId);
    expect(s.levels.every((l) => (l.available ?? -1) >= 0)).toBe(true);
    expect(s.available + s.inTransit).toBe(30 - late);
    expect(s.net).toBe(150 - 30 + late);

    await settled(a.client, couponId);
    const ledger = await ledgerFigures(a.app, couponId);
    expect(ledger.deductRows).toBe(150 + late);
    expect(ledger.compensateRows).toBe(30);
    expect(ledger.duplicates).toBe(0);
    expect(ledger.remaining).toBe(30 - late);

    const metrics = await (await fetch(`${a.httpUrl}/metrics`)).text();
    const count = Number(/^shardstock_shard_batch_size_count (\d+)/m.exec(metrics)?.[1]);
    const sum = Number(/^shardstock_shard_batch_size_sum (\d+)/m.exec(metrics)?.[1]);
    expect(count).toBeGreaterThan(0);
    // Fewer calls than requests: some requests shared a call.
    expect(sum).toBeGreaterThan(count);
  });

  it('when Reserves on one shard run out of stock inside a batch, then the ones it leaves short fall back to the other shard exactly as alone, and their confirmations settle', async () => {
    const { couponId, ids } = await eightHomedOnAShardOfFive('rb');
    const counted = batchCounters();
    const holds = await Promise.all(ids.map((requestId) => a.client.reserve({ couponId, requestId, quantity: 1n, ttlMs: 60_000 })));
    expect(holds.map((r) => [r.outcome, r.replayed])).toEqual(Array(8).fill([ReserveOutcome.HELD, false]));
    expect(counted()).toEqual({ fallbacks: 3, batched: 8, fewerCallsThanRequests: true });
    let s = await shardState(a.app, couponId);
    expect([s.available + s.inTransit, s.held, s.net]).toEqual([2, 8, 0]);
    await Promise.all(holds.map((r) => a.client.confirm({ target: { case: 'holdId', value: r.hold!.holdId } })));
    s = await shardState(a.app, couponId);
    expect([s.available + s.inTransit, s.held, s.net]).toEqual([2, 0, 8]);
    await settled(a.client, couponId);
    const ledger = await ledgerFigures(a.app, couponId);
    expect([ledger.deductRows, ledger.duplicates, ledger.remaining]).toEqual([8, 0, 2]);
  });

  it('when 500 concurrent Reserves (100 ids sent twice) and 200 Deducts race for 150 units over 3 shards, then holds + deductions == stock, every twin replays, and once holds are confirmed or released the ledger rows == deductions + confirmations', async () => {
    const couponId = uniqueId();
    await a.client.createCoupon({ couponId, totalStock: 150n, shardCount: 3 });
    const rIds = Array.from({ length: 400 }, (_, i) => `r${i}`);
    const dIds = Array.from({ length: 200 }, (_, i) => `d${i}`);
    const sizes = a.app.metrics.shardBatchSize.child();
    const [callsBefore, sumBefore] = [sizes.count, sizes.sum];
    const [holds, deducts] = await Promise.all([
      Promise.all(
        [...rIds, ...rIds.slice(0, 100)].map((requestId) => a.client.reserve({ couponId, requestId, quantity: 1n, ttlMs: 60_000 })),
      ),
      Promise.all(dIds.map((requestId) => a.client.deduct({ couponId, requestId, quantity: 1n }))),
    ]);
    // Reserves and Deducts shared calls.
    expect(sizes.sum - sumBefore).toBeGreaterThan(sizes.count - callsBefore);
    const held = rIds.filter((_, i) => holds[i]!.outcome === ReserveOutcome.HELD);
    const deducted = deducts.filter((r) => r.outcome === DeductOutcome.DEDUCTED).length;
    expect(held.length + deducted).toBe(150);
    const won = new Set(held);
    const twins = holds.slice(400);
    expect(twins.filter((r) => r.outcome === ReserveOutcome.HELD && r.replayed)).toHaveLength(
      rIds.slice(0, 100).filter((id) => won.has(id)).length,
    );
    expect(holds.filter((r) => r.outcome === ReserveOutcome.HELD && !r.replayed)).toHaveLength(held.length);
    let s = await shardState(a.app, couponId);
    expect(s.levels.every((l) => (l.available ?? -1) >= 0)).toBe(true);
    expect([s.available + s.inTransit, s.held, s.net]).toEqual([0, held.length, deducted]);

    // Confirm every other hold, release the rest.
    const holdIds = holds.slice(0, 400).flatMap((r) => (r.outcome === ReserveOutcome.HELD ? [r.hold!.holdId] : []));
    const confirmed = holdIds.filter((_, i) => i % 2 === 0);
    const released = holdIds.filter((_, i) => i % 2 === 1);
    await Promise.all([
      ...confirmed.map((value) => a.client.confirm({ target: { case: 'holdId', value } })),
      ...released.map((value) => a.client.release({ target: { case: 'holdId', value } })),
    ]);
    s = await shardState(a.app, couponId);
    expect([s.available + s.inTransit, s.held, s.net]).toEqual([released.length, 0, deducted + confirmed.length]);
    await settled(a.client, couponId);
    const ledger = await ledgerFigures(a.app, couponId);
    expect([ledger.deductRows, ledger.duplicates, ledger.remaining]).toEqual([deducted + confirmed.length, 0, released.length]);
  });
});
