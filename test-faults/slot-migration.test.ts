// A live reshard: one of a coupon's shards has its slot moved to another master (CLUSTER SETSLOT MIGRATING /
// IMPORTING, MIGRATE key by key, SETSLOT NODE) while a rush buys. During the move the source answers ASK for
// keys already gone and TRYAGAIN for calls that need keys on both sides; afterwards the old owner answers
// MOVED. None of that is data loss: no shard may be "recovered", no unit sold twice or lost, and a
// well-behaved client (UNAVAILABLE retried with the same request_id) gets every answer.
import { describe, expect, it } from 'vitest';
import slotOf from 'cluster-key-slot';
import { status } from '@grpc/grpc-js';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { allShards, homeShard } from '../src/domain/routing.js';
import { shardState } from '../test/support/inspect.js';
import { ledgerFigures, waitFor } from '../test/support/settlement.js';
import { uniqueId, type TestApp } from '../test/support/harness.js';
import { cli, type NodeInfo, type OwnCluster, useInstancePair } from './support/own-cluster.js';
import { Redis } from 'ioredis';
import { luaScript } from '../src/redis/cluster.js';
import { Scripts } from '../src/redis/scripts.js';

let cluster: OwnCluster;
let a: TestApp;
let b: TestApp;
useInstancePair(7101, (c, x, y) => {
  [cluster, a, b] = [c, x, y];
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Moves `slot` to master `to` the way redis-cli --cluster reshard does, one key per MIGRATE with a pause
 * between, so that calls meet the slot half moved. `order`: keys moved before the others, in that order, and
 * `last` after every other (the outbox first and the shard's hash last: the stream leaves while the hash and
 * records still say the shard is here, so a call that finds the shard can still fail writing its events).
 * Returns how many keys moved. */
async function migrateSlot(slot: number, toPort: number, keyPauseMs: number, order: string[], last: string): Promise<number> {
  const { from, to } = await beginMove(slot, toPort);
  let moved = 0;
  for (;;) {
    const keys = (await cli(from.port, 'cluster', 'getkeysinslot', String(slot), '1000')).split('\n').filter(Boolean);
    if (keys.length === 0) break;
    const rank = (k: string) => (k === last ? order.length + 1 : order.includes(k) ? order.indexOf(k) : order.length);
    keys.sort((x, y) => rank(x) - rank(y));
    for (const key of keys) {
      const r = await cli(from.port, 'migrate', '127.0.0.1', String(to.port), '', '0', '5000', 'keys', key);
      expect(r).toBe('OK');
      moved++;
      await sleep(keyPauseMs);
    }
  }
  await completeMove(slot, from, to);
  return moved;
}

/** Marks `slot` as moving from the master that serves it to master `toPort` (any other master when absent),
 * as redis-cli --cluster reshard does first: the target importing, then the source migrating. */
async function beginMove(slot: number, toPort?: number): Promise<{ from: NodeInfo; to: NodeInfo }> {
  const nodes = await cluster.nodes();
  const from = nodes.find((n) => n.role === 'master' && n.slots.some(([x, y]) => slot >= x && slot <= y))!;
  const to = nodes.find((n) => n.role === 'master' && n.id !== from.id && (toPort === undefined || n.port === toPort))!;
  expect(await cli(to.port, 'cluster', 'setslot', String(slot), 'importing', from.id)).toBe('OK');
  expect(await cli(from.port, 'cluster', 'setslot', String(slot), 'migrating', to.id)).toBe('OK');
  return { from, to };
}

/** Moves whatever of `slot` is still on `from` to `to` and gives `to` the slot (its half-done move completed). */
async function completeMove(slot: number, from: NodeInfo, to: NodeInfo): Promise<void> {
  const nodes = await cluster.nodes();
  for (;;) {
    const keys = (await cli(from.port, 'cluster', 'getkeysinslot', String(slot), '1000')).split('\n').filter(Boolean);
    if (keys.length === 0) break;
    await cli(from.port, 'migrate', '127.0.0.1', String(to.port), '', '0', '5000', 'keys', ...keys);
  }
  // The target first, as redis-cli does, so that no node ever names a master that does not yet know it owns the slot.
  for (const n of [to, from, ...nodes.filter((x) => x.role === 'master' && x.id !== to.id && x.id !== from.id)])
    await cli(n.port, 'cluster', 'setslot', String(slot), 'node', to.id);
}

/** Calls of WAIT `port` has answered since it started. */
async function waitsOn(port: number): Promise<number> {
  return Number(/cmdstat_wait:calls=(\d+)/.exec(await cli(port, 'info', 'commandstats'))?.[1] ?? 0);
}

interface Tally {
  deducted: string[];
  soldOut: number;
  unavailable: number;
  /** The UNAVAILABLE messages, with their counts (for the log). */
  why: Map<string, number>;
  failures: string[];
}

/** `count` new buyers, `concurrency` in flight across both instances; UNAVAILABLE retried with the same id. */
async function rush(couponId: string, prefix: string, count: number, concurrency: number): Promise<Tally> {
  const t: Tally = { deducted: [], soldOut: 0, unavailable: 0, why: new Map(), failures: [] };
  let next = 0;
  const worker = async () => {
    for (let n = next++; n < count; n = next++) {
      const requestId = `${prefix}${n}`;
      for (let attempt = 0; ; attempt++) {
        try {
          const r = await (n % 2 ? a : b).client.deduct({ couponId, requestId, quantity: 1n });
          if (r.outcome === DeductOutcome.DEDUCTED) t.deducted.push(requestId);
          else if (r.outcome === DeductOutcome.SOLD_OUT) t.soldOut++;
          else t.failures.push(`${requestId}: outcome ${r.outcome}`);
          break;
        } catch (err) {
          const e = err as { code?: number; message?: string };
          if (e.code !== status.UNAVAILABLE || attempt >= 40) {
            t.failures.push(`${requestId}: ${e.message}`);
            break;
          }
          t.unavailable++;
          const why = (e.message ?? '').replace(/[0-9a-f]{6,}|\d+/g, 'N');
          t.why.set(why, (t.why.get(why) ?? 0) + 1);
          await sleep(50 + Math.random() * 50);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return t;
}

/** Compensate with retries of UNAVAILABLE (same request id), as a well-behaved client does. */
async function refund(t: TestApp, couponId: string, requestId: string): Promise<CompensateOutcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      return (await t.client.compensate({ couponId, requestId, reason: 'refund during a reshard' })).outcome;
    } catch (err) {
      if ((err as { code?: number }).code !== status.UNAVAILABLE || attempt >= 40) throw err;
      await sleep(50 + Math.random() * 50);
    }
  }
}

describe('a slot moved to another master during a sale', () => {
  // One key of the shard leaves, the others stay: whichever it is, the per-master call writes nothing of the
  // shard. The call carries a new deduction (writes the level, a record, the outbox), a replay vouched for
  // at the `replica` level (writes the ack key) and a Reserve (writes the holds), so every one of the eight
  // keys is read or written.
  for (const [name, at] of [
    ['outbox', 5],
    ['ack key', 6],
    ['holds', 7],
    ['hash', 0],
    ['oldest record hash', 1],
    ['newest record hash', 3],
    ['user counts', 4],
  ] as const) {
    it(`when a shard's ${name} has left for the new master and its other keys have not, then a per-master call writes nothing of that shard and answers it -10`, async () => {
      const scripts = new Scripts(a.app.redis, a.namespace, a.app.config.idempotencyWindowS);
      const id = uniqueId('half');
      const shard = { couponId: id, index: 0, tag: `${id}#0.0` };
      await scripts.shardInit(shard, 10, 0);
      expect((await scripts.deduct(shard, { requestId: 'before', userId: 'u1', quantity: 1, perUserLimit: 5 }, [], '', 1)).kind).toBe(
        'deducted',
      );
      const ops = [
        { op: 'D' as const, input: { requestId: 'during', userId: 'u1', quantity: 1, perUserLimit: 5 } },
        { op: 'D' as const, input: { requestId: 'before', userId: 'u1', quantity: 1, perUserLimit: 5 } },
        { op: 'R' as const, input: { requestId: 'hold', userId: 'u1', quantity: 1, perUserLimit: 5, ttlMs: 60_000 } },
      ];
      const args = scripts.nodeBatchArgs([{ shard, ops }], true);
      // Every one of the shard's eight keys exists (three record buckets, user counts, outbox, ack, holds):
      // nothing the requests read is missing, so only the one key that left can fail them.
      const keys = args.slice(0, 8) as string[];
      const [hash, r0, r1, r2, users, , ack, holds] = keys;
      for (const k of [r0!, r1!, r2!]) await a.app.redis.hset(k, 'zz', '1');
      await a.app.redis.hset(users!, 'nobody', '0');
      await a.app.redis.set(ack!, '1');
      await a.app.redis.zadd(holds!, '1', 'nobody|');
      expect(await a.app.redis.exists(...keys)).toBe(8);
      const slot = slotOf(hash!);
      const { from, to } = await beginMove(slot);
      expect(await cli(from.port, 'migrate', '127.0.0.1', String(to.port), '', '0', '5000', 'keys', keys[at]!)).toBe('OK');
      const node = new Redis({ host: '127.0.0.1', port: from.port, lazyConnect: true });
      try {
        const stayed = keys.filter((_, i) => i !== at);
        const dump = async () => Promise.all(stayed.map(async (k) => [k, await node.dump(k)]));
        const before = await dump();
        // The call is routed by a key of another slot on the same node, as when this shard is not the first of
        // its master's call: the node runs it, and the shard's own keys are reached undeclared.
        const onFrom = (k: string) => from.slots.some(([x, y]) => slotOf(k) >= x && slotOf(k) <= y) && slotOf(k) !== slot;
        let route = `${id}-route`;
        for (let i = 0; !onFrom(route); i++) route = `${id}-route-${i}`;
        const nodeBatch = luaScript('nodeBatch');
        const reply = (await node.call('eval', nodeBatch.lua, 1, route, ...args)) as unknown[];
        expect([Number(reply[0]), Number(reply[3]), Number(reply[6])]).toEqual([-10, -10, -10]);
        // Nothing of the shard was written: not its level, a record, a user's count, the outbox, the ack key or
        // the holds.
        expect(await dump()).toEqual(before);
      } finally {
        node.disconnect();
        // The rest of the slot follows, and the move completes, as an operator's reshard would.
        await completeMove(slot, from, to);
      }
      // Through the client, once the move is done, the shard sells again from where it was.
      await waitFor(
        'the client to route the slot to its new master',
        async () => (await a.app.redis.hget(hash!, 'avail')) ?? '',
        (v) => v === '9',
      );
      expect((await scripts.deduct(shard, { requestId: 'after', userId: 'u1', quantity: 1, perUserLimit: 5 }, [], '', 1)).kind).toBe(
        'deducted',
      );
      expect(await a.app.redis.hget(hash!, 'avail')).toBe('8');
    });
  }

  it('when the cluster client follows an ASK for a write (the shard has left for the importing node, the slot still migrating), then the replica WAIT goes to the node that ran it', async () => {
    const id = uniqueId('ask');
    const shard = { couponId: id, index: 0, tag: `${id}#0.0` };
    const store = a.app.store;
    expect(await store.initShard(shard, 10, 0)).toBe(true);
    // A first credit creates the shard's credit log: on the importing node a call runs only if all its keys are there.
    expect(await store.credit(shard, uniqueId('credit'), 1)).toBe('applied');
    const key = store.keys(shard).shard;
    const slot = slotOf(key);
    const { from, to } = await beginMove(slot);
    try {
      // Every key of the slot leaves; the slot stays migrating, so the old owner answers ASK for each of them
      // and the client's slot map still names it.
      const keys = (await cli(from.port, 'cluster', 'getkeysinslot', String(slot), '1000')).split('\n').filter(Boolean);
      expect(keys).toContain(key);
      expect(await cli(from.port, 'migrate', '127.0.0.1', String(to.port), '', '0', '5000', 'keys', ...keys)).toBe('OK');
      const [fromWaits, toWaits] = [await waitsOn(from.port), await waitsOn(to.port)];
      // A credit goes alone through the cluster client, which follows the ASK itself; its answer waits for
      // the replicas of the node that ran it.
      expect(await store.credit(shard, uniqueId('credit'), 3)).toBe('applied');
      // Read where it ran (the importing node serves a migrating slot's keys only after ASKING).
      const node = new Redis({ host: '127.0.0.1', port: to.port, lazyConnect: true });
      try {
        const out = await node.pipeline().asking().hget(key, 'avail').exec();
        expect(out?.[1]).toEqual([null, '14']);
      } finally {
        node.disconnect();
      }
      expect(await waitsOn(to.port)).toBeGreaterThan(toWaits);
      // The slot map's master was waited on as well (which node ran the write is not known to the WAIT).
      expect(await waitsOn(from.port)).toBeGreaterThan(fromWaits);
    } finally {
      await completeMove(slot, from, to);
    }
  });

  it('when one shard of a selling coupon is resharded key by key mid-rush while earlier buyers are refunded, then every unit is accounted for, nothing is recovered, and every DEDUCTED replays', async () => {
    const id = uniqueId('mig');
    const stock = 1500;
    await a.client.createCoupon({ couponId: id, totalStock: BigInt(stock), shardCount: 12 });
    const coupon = (await a.app.repo.find(id))!;
    // A shard that shares its master with others of the coupon (so the per-master calls carry it beside
    // them), moved to a master that holds another.
    const masters = (await cluster.nodes()).filter((n) => n.role === 'master');
    const ownerOf = (slot: number) => masters.find((m) => m.slots.some(([x, y]) => slot >= x && slot <= y))!;
    const slots = allShards(coupon).map((s) => slotOf(a.app.store.keys(s).shard));
    const counts = new Map<number, number>();
    for (const s of slots) counts.set(ownerOf(s).port, (counts.get(ownerOf(s).port) ?? 0) + 1);
    const movedShard = slots.findIndex((s) => counts.get(ownerOf(s).port)! >= 2);
    expect(movedShard).toBeGreaterThanOrEqual(0);
    const slot = slots[movedShard]!;
    const target = masters.find((m) => m.port !== ownerOf(slot).port)!;
    // Some stock sold before the move, so the shard has request records and outbox entries to carry over.
    const warm = await rush(id, 'warm-', 300, 16);
    expect(warm.failures).toEqual([]);
    expect(warm.deducted.length).toBe(300);

    const recoveries = () =>
      a.app.settlement.recovery.stats.recoveries +
      b.app.settlement.recovery.stats.recoveries +
      a.app.deduct.stats.reloads +
      b.app.deduct.stats.reloads;
    const recoveriesBefore = recoveries();
    const t0 = Date.now();
    let rushMs = 0;
    const buying = rush(id, 'rush-', 2000, 64).then((r) => {
      rushMs = Date.now() - t0;
      return r;
    });
    // Refunds during the move: every warm deduction homed on the moving shard, and others up to 100. Their units
    // go back on sale (the rush may buy them), each exactly once.
    const onMoved = warm.deducted.filter((rid) => homeShard(coupon, rid, '') === movedShard);
    const refunds = [...onMoved, ...warm.deducted.filter((rid) => !onMoved.includes(rid))].slice(0, 100);
    expect(onMoved.length).toBeGreaterThan(0);
    const refunding = Promise.all(refunds.map((rid, i) => refund(i % 2 ? a : b, id, rid)));
    await sleep(150);
    const keys = a.app.store.keys(allShards(coupon)[movedShard]!);
    const moved = await migrateSlot(slot, target.port, 250, [keys.outbox], keys.shard);
    const migrationMs = Date.now() - t0;
    const t = await buying;
    const refunded = await refunding;
    console.log(
      `[faults] slot migration: ${JSON.stringify({ slot, moved, migrationMs, rushMs, deducted: t.deducted.length, soldOut: t.soldOut, refunds: refunds.length, refundsOnMovedShard: onMoved.length, fencedMs: [a.app.fence?.stats.lastFencedMs, b.app.fence?.stats.lastFencedMs], unavailable: t.unavailable, why: Object.fromEntries(t.why), failures: t.failures.length })}`,
    );
    expect(moved).toBeGreaterThanOrEqual(2);
    expect((await cluster.masterOfSlot(slot)).port).toBe(target.port);
    expect(t.failures).toEqual([]);
    expect(t.deducted.length + t.soldOut).toBe(2000);
    // Each refund applied once: COMPENSATED, or ALREADY_COMPENSATED for a retry whose first try had applied it.
    expect(refunded.filter((r) => r !== CompensateOutcome.COMPENSATED && r !== CompensateOutcome.ALREADY_COMPENSATED)).toEqual([]);
    // Every unit accounted for: sold before and not refunded, sold in the rush, or back on sale (a refund that
    // landed after the last buyer). Not one sold twice, none stranded on the moved shard.
    const s0 = await shardState(a.app, id);
    expect(s0.inTransit).toBe(0);
    expect(300 - refunds.length + t.deducted.length + s0.available).toBe(stock);
    expect(s0.net).toBe(300 - refunds.length + t.deducted.length);
    // A shard that moved is not a shard that was lost: no reload, no recovery.
    expect(recoveries()).toBe(recoveriesBefore);

    // Every DEDUCTED answer replays (its record moved with the shard), refunded ones as refunded; none takes a
    // second unit.
    const all = [...warm.deducted, ...t.deducted];
    const replays = await Promise.all(all.map((rid, i) => (i % 2 ? b : a).client.deduct({ couponId: id, requestId: rid, quantity: 1n })));
    expect(replays.filter((r) => r.outcome === DeductOutcome.DEDUCTED && r.replayed).length).toBe(all.length);
    expect(replays.filter((r) => r.compensated).length).toBe(refunds.length);
    expect((await shardState(a.app, id)).net).toBe(s0.net);

    const rec = await waitFor(
      'settlement to catch up',
      () => a.client.reconcile({ couponId: id }),
      (r) => r.outboxEvents === 0n && r.jetstreamPending === 0n && r.inFlightNet === 0n,
      60_000,
    );
    const left = BigInt(s0.available);
    expect(rec).toMatchObject({ consistent: true, redisAvailable: left, settledRemaining: left, redisDrift: 0n });
    const f = await ledgerFigures(a.app, id);
    expect([f.anomalies, f.remaining, f.deductRows, f.compensateRows]).toEqual([[], s0.available, all.length, refunds.length]);
  });
});
