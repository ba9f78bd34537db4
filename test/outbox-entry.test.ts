// The packed outbox entry (lua/includes/shard-ops.lua addEvent / closeRun): one stream entry per Lua call, one
// field per event. What the scripts write must be exactly what the parser (src/settlement/event.ts) reads, and
// an entry of many events must be settled exactly once, also when it is relayed again (an instance that
// crashed after JetStream stored the events and before the entry left the outbox).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShardRef } from '../src/domain/ports.js';
import { type BatchOp, Scripts } from '../src/redis/scripts.js';
import { fromOutboxEntry, type SettlementEvent } from '../src/settlement/event.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures, settled } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
});
afterAll(async () => {
  await a?.close();
});

// A fixed clock near the real one (the scripts refuse a clock half an idempotency window off the server's).
const NOW = Date.now();
const scripts = () => new Scripts(a.app.redis, a.namespace, a.app.config.idempotencyWindowS, () => NOW);

async function newShard(stock: number): Promise<ShardRef> {
  const id = uniqueId();
  const shard = { couponId: id, index: 5, tag: `${id}#5.0` };
  await scripts().shardInit(shard, stock, 0);
  return shard;
}

async function entries(shard: ShardRef): Promise<string[][]> {
  return (await a.app.redis.xrange(scripts().keys(shard).outbox, '-', '+')).map(([, f]) => f);
}

const event = (shard: ShardRef, e: Partial<SettlementEvent>): SettlementEvent => ({
  kind: 'D',
  couponId: shard.couponId,
  requestId: '',
  userId: '',
  quantity: 1,
  shard: shard.index,
  occurredAt: NOW,
  reason: '',
  ...e,
});

describe('packed outbox entries', () => {
  it('when one batch deducts, replays and compensates, then it appends ONE entry and the parser reads back exactly its events, in order', async () => {
    const shard = await newShard(100);
    const ops: BatchOp[] = [
      { op: 'D', input: { requestId: 'r1', userId: 'u.1', quantity: 3, perUserLimit: 5 } },
      { op: 'D', input: { requestId: 'r2', userId: '', quantity: 1, perUserLimit: 0 } },
      { op: 'D', input: { requestId: 'r1', userId: 'u.1', quantity: 3, perUserLimit: 5 } }, // a replay: no event
      { op: 'C', requestId: 'r1', reason: 'refund | order 7 | late', limited: true },
      { op: 'D', input: { requestId: 'r3', userId: 'u:3', quantity: 2, perUserLimit: 0 } },
    ];
    const replies = await scripts().shardBatch(shard, ops, true);
    expect(replies.map((r) => (r instanceof Error ? r.message : r.kind))).toEqual([
      'deducted',
      'deducted',
      'replay',
      'compensated',
      'deducted',
    ]);
    const all = await entries(shard);
    expect(all).toHaveLength(1);
    expect(fromOutboxEntry(all[0]!).map((e) => e.event)).toEqual([
      event(shard, { requestId: 'r1', userId: 'u.1', quantity: 3 }),
      event(shard, { requestId: 'r2' }),
      event(shard, { kind: 'C', requestId: 'r1', userId: 'u.1', quantity: 3, reason: 'refund | order 7 | late' }),
      event(shard, { requestId: 'r3', userId: 'u:3', quantity: 2 }),
    ]);
  });

  it('when a single Deduct and a single Compensate run (deduct-7.lua, compensate-6.lua), then each appends an entry the parser reads', async () => {
    const shard = await newShard(10);
    const s = scripts();
    expect(await s.deduct(shard, { requestId: 'one', userId: 'u1', quantity: 2, perUserLimit: 0 }, [], '', 1)).toEqual({
      kind: 'deducted',
      remaining: 8,
    });
    expect(await s.compensate(shard, 'one', 'why', false)).toMatchObject({ kind: 'compensated', quantity: 2 });
    expect((await entries(shard)).flatMap((f) => fromOutboxEntry(f).map((e) => e.event))).toEqual([
      event(shard, { requestId: 'one', userId: 'u1', quantity: 2 }),
      event(shard, { kind: 'C', requestId: 'one', userId: 'u1', quantity: 2, reason: 'why' }),
    ]);
  });

  it('when a batch leaves nothing to settle (replays and refusals only), then it appends no entry', async () => {
    const shard = await newShard(1);
    await scripts().shardBatch(shard, [{ op: 'D', input: { requestId: 'x', userId: '', quantity: 1, perUserLimit: 0 } }], false);
    const before = (await entries(shard)).length;
    const replies = await scripts().shardBatch(
      shard,
      [
        { op: 'D', input: { requestId: 'x', userId: '', quantity: 1, perUserLimit: 0 } },
        { op: 'D', input: { requestId: 'y', userId: '', quantity: 1, perUserLimit: 0 } },
      ],
      false,
    );
    expect(replies.map((r) => (r instanceof Error ? r.message : r.kind))).toEqual(['replay', 'short']);
    expect(await entries(shard)).toHaveLength(before);
  });

  it('when an entry of many events is relayed, and then relayed again as a crashed relay would leave it, then the ledger has each event exactly once', async () => {
    const couponId = uniqueId();
    await a.client.createCoupon({ couponId, totalStock: 200n, shardCount: 1 });
    const coupon = (await a.app.repo.find(couponId))!;
    const shard: ShardRef = { couponId, index: 0, tag: coupon.shardTags[0]! };
    const s = new Scripts(a.app.redis, a.namespace, a.app.config.idempotencyWindowS);
    const ops: BatchOp[] = Array.from({ length: 64 }, (_, i) => ({
      op: 'D',
      input: { requestId: `m${i}`, userId: `u${i % 5}`, quantity: 1 + (i % 3), perUserLimit: 0 },
    }));
    ops.push({ op: 'C', requestId: 'm7', reason: 'back | once', limited: false });
    // The same batch on a twin shard of the coupon that no relay reads: its entry is the one the served shard
    // got, kept for the replay below.
    const twin: ShardRef = { couponId, index: 0, tag: `${coupon.shardTags[0]}-twin` };
    await s.shardInit(twin, 200, 0);
    const replies = await s.shardBatch(shard, ops, false);
    expect(replies.every((r) => !(r instanceof Error))).toBe(true);
    expect(await s.shardBatch(twin, ops, false)).toEqual(replies);
    await settled(a.client, couponId);
    const first = await ledgerFigures(a.app, couponId);
    expect([first.deductRows, first.compensateRows]).toEqual([64, 1]);

    // The entry once more in the served shard's outbox, as an outbox still holds an entry whose events JetStream
    // stored when the relay died before removing it: every event is a duplicate, nothing is settled twice.
    const copies = await a.app.redis.xrange(s.keys(twin).outbox, '-', '+');
    expect(copies).toHaveLength(1);
    const fields = copies[0]![1];
    expect(fromOutboxEntry(fields)).toHaveLength(65);
    const duplicatesBefore = a.app.settlement.stats.relay.duplicates;
    await a.app.redis.xadd(s.keys(shard).outbox, '*', ...fields);
    await settled(a.client, couponId);
    const again = await ledgerFigures(a.app, couponId);
    expect([again.deductRows, again.compensateRows]).toEqual([64, 1]);
    expect(a.app.settlement.stats.relay.duplicates - duplicatesBefore).toBe(65);
    await a.app.redis.del(s.keys(twin).shard, s.keys(twin).outbox);
  });
});
