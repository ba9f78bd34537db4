// At the `replica` ack level the group commit sends one call for all the shards a master holds
// (lua/node-batch-1.lua) and its WAIT in one write (shard-batcher.ts sendOnMaster, ReplicaAck.pipelineWithWait),
// by EVALSHA on the node's connection. So neither the cluster client's NOSCRIPT fallback nor its routing is
// there: a node that lost its scripts (it restarted, or is a freshly promoted replica) and a slot map that is
// stale (a failover) must cost a re-send, never a lost or doubled deduction. That the WAIT covers the calls
// before it (an answer only once a replica holds it) is test-faults/replica-ack.test.ts's: with a lagging
// replica, a WAIT sent ahead of the calls fails its two 'replica lags behind a deduction' cases.
import { status } from '@grpc/grpc-js';
import slotOf from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShardRef } from '../src/domain/ports.js';
import { luaScript } from '../src/redis/cluster.js';
import { ReplicaAck } from '../src/redis/replica-ack.js';
import { ShardBatcher } from '../src/redis/shard-batcher.js';
import { parseShardBatch, type Reply, Scripts } from '../src/redis/scripts.js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { ledgerFigures, settled, sleep } from './support/settlement.js';

let a: TestApp;
/** The same at the `leader` level: one call per master, with no WAIT after it. */
let leader: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_ACK_LEVEL: 'replica' });
  leader = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_ACK_LEVEL: 'leader' });
});
afterAll(async () => {
  await a?.close();
  await leader?.close();
});

/** A Deduct retried with its request id while it fails UNAVAILABLE (a failover fence), as callers do. */
async function deduct(couponId: string, requestId: string, app = a) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await app.client.deduct({ couponId, requestId, userId: requestId, quantity: 1n });
    } catch (err) {
      if ((err as { code?: number }).code !== status.UNAVAILABLE || attempt >= 50) throw err;
      await sleep(100);
    }
  }
}

async function sale(couponId: string, requests: number, prefix: string, app = a) {
  const ids = Array.from({ length: requests }, (_, i) => `${prefix}${i}`);
  const answers = await Promise.all(ids.map((requestId) => deduct(couponId, requestId, app)));
  return { ids, answers };
}

/** 40 shards of one new coupon (not created in MySQL): those on the first one's master and the others. */
function shardsAround() {
  const scripts = new Scripts(a.app.redis, a.namespace, a.app.config.idempotencyWindowS);
  const id = uniqueId();
  const owner = (s: ShardRef) => a.app.redis.slots[slotOf(scripts.keys(s).shard)]![0]!;
  const shards: ShardRef[] = [];
  for (let i = 0; shards.length < 40; i++) shards.push({ couponId: id, index: 0, tag: `${id}#0.${i}` });
  const here = owner(shards[0]!);
  return { scripts, here, local: shards.filter((s) => owner(s) === here), away: shards.filter((s) => owner(s) !== here) };
}

describe('group commit: one call per master, the WAIT in the same write', () => {
  it.each(['replica', 'leader'])(
    'when every master forgets its scripts in the middle of a sale (%s level), then the calls are sent again and exactly the stock is sold, once per request id',
    async (level) => {
      const app = level === 'leader' ? leader : a;
      const couponId = uniqueId();
      await app.client.createCoupon({ couponId, totalStock: 300n, shardCount: 16 });
      const first = await sale(couponId, 150, 'a', app);
      expect(first.answers.every((r) => r.outcome === DeductOutcome.DEDUCTED)).toBe(true);

      for (const node of app.app.redis.nodes('master')) await node.script('FLUSH');
      // New requests and retries of answered ones, together, right after the flush.
      const [second, retried] = await Promise.all([
        sale(couponId, 250, 'b', app),
        Promise.all(first.ids.slice(0, 60).map((requestId) => deduct(couponId, requestId, app))),
      ]);
      expect(retried.every((r) => r.outcome === DeductOutcome.DEDUCTED && r.replayed)).toBe(true);
      expect(second.answers.filter((r) => r.outcome === DeductOutcome.DEDUCTED).length).toBe(150);
      expect(second.answers.filter((r) => r.outcome === DeductOutcome.SOLD_OUT).length).toBe(100);

      const s = await shardState(app.app, couponId);
      expect(s.levels.every((l) => (l.available ?? -1) >= 0)).toBe(true);
      expect(s.available + s.inTransit).toBe(0);
      expect(s.net).toBe(300);
      await settled(app.client, couponId);
      const ledger = await ledgerFigures(app.app, couponId);
      expect(ledger.deductRows).toBe(300);
      expect(ledger.duplicates).toBe(0);
      expect(ledger.remaining).toBe(0);
    },
  );

  it("when a node's call holds a shard whose slot another master serves, then that shard's requests are answered -10 with nothing of it written, and the node's own shards run", async () => {
    const { scripts, here, local: both, away: others } = shardsAround();
    // Two shards on one master and one on another.
    const local = both.slice(0, 2);
    const away = others[0]!;
    for (const s of [...local, away]) await scripts.shardInit(s, 5, 0);
    const op = (requestId: string) => ({ op: 'D' as const, input: { requestId, userId: '', quantity: 1, perUserLimit: 0 } });
    const batches: [ShardRef, ReturnType<typeof op>[]][] = [
      [local[0]!, [op('l0a'), op('l0b')]],
      [away, [op('w0'), op('w1'), op('w2')]],
      [local[1]!, [op('l1a')]],
    ];
    const node = a.app.redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === here)!;
    const args = [
      scripts.keys(local[0]!).shard,
      ...scripts.nodeBatchArgs(
        batches.map(([shard, ops]) => ({ shard, ops })),
        false,
      ),
    ];
    const nb = luaScript('nodeBatch');
    await node.script('LOAD', nb.lua);
    const flat = (await node.evalsha(nb.sha, 1, ...args)) as Reply;
    expect(flat).toHaveLength(3 * 6);
    expect(parseShardBatch(batches[0]![1], flat.slice(0, 6)).map((r) => (r instanceof Error ? 'error' : r.kind))).toEqual([
      'deducted',
      'deducted',
    ]);
    expect(flat.slice(6, 15).filter((_, i) => i % 3 === 0)).toEqual([-10, -10, -10]);
    expect(String(flat[7])).toContain('non local key');
    expect(parseShardBatch(batches[2]![1], flat.slice(15, 18)).map((r) => (r instanceof Error ? 'error' : r.kind))).toEqual(['deducted']);
    expect(await a.app.redis.hget(scripts.keys(away).shard, 'avail')).toBe('5');
    expect(await a.app.redis.xlen(scripts.keys(away).outbox)).toBe(0);
    expect(await a.app.redis.hget(scripts.keys(local[0]!).shard, 'avail')).toBe('3');
  });

  it("when the client's slot map names the wrong master for a shard, then its requests are sent again to the right one and each is deducted once", async () => {
    const { scripts, here, local, away: others } = shardsAround();
    const [home, home2] = local;
    const [away, away2] = others;
    for (const s of [home!, home2!, away!, away2!]) await scripts.shardInit(s, 10, 0);
    // A stale map, as a failover leaves it until the client's next refresh: the first call of each `away`
    // shard names `here` as its master; the re-send after the redirect sees the right one.
    const lied = new Set<string>();
    const ack = new ReplicaAck(a.app.redis, 2000);
    let redirects = 0;
    const batcher = new ShardBatcher(scripts, {
      max: 64,
      waitUs: 0,
      vouch: true,
      beforeWrite: (key) => {
        const truth = a.app.redis.slots[slotOf(key)]![0]!;
        if (truth === here || lied.has(key)) return truth;
        lied.add(key);
        return here;
      },
      afterWrite: (key, before) => ack.afterWrite(key, before),
      onMaster: (node, commands) => ack.pipelineWithWait(node, commands),
      onRedirect: () => redirects++,
    });
    const input = (requestId: string) => ({ requestId, userId: '', quantity: 1, perUserLimit: 0 });
    // One call for `here`: home's requests first (the key it declares is served), away's after (answered -10);
    // then a call whose first shard is away2 (the node refuses the whole call with MOVED), home2 after it.
    const first = await Promise.all([
      ...['h1', 'h2'].map((r) => batcher.deduct(home!, input(r))),
      ...['a1', 'a2', 'a3'].map((r) => batcher.deduct(away!, input(r))),
    ]);
    const second = await Promise.all([...['b1', 'b2'].map((r) => batcher.deduct(away2!, input(r))), batcher.deduct(home2!, input('g1'))]);
    expect([...first, ...second].map((r) => r.kind)).toEqual(Array(8).fill('deducted'));
    expect(redirects).toBe(2);
    expect(lied.size).toBe(2);
    const avail = async (s: ShardRef) => Number(await a.app.redis.hget(scripts.keys(s).shard, 'avail'));
    expect([await avail(home!), await avail(away!), await avail(away2!), await avail(home2!)]).toEqual([8, 7, 8, 9]);
    // Asked again, every request is a replay: none was deducted twice.
    const again = await Promise.all([
      batcher.deduct(away!, input('a1')),
      batcher.deduct(away2!, input('b2')),
      batcher.deduct(home!, input('h1')),
    ]);
    expect(again.map((r) => r.kind)).toEqual(['replay', 'replay', 'replay']);
    expect([await avail(home!), await avail(away!), await avail(away2!)]).toEqual([8, 7, 8]);
  });
});

describe('group commit: one call per master in flight', () => {
  it("when requests for a master's other shards arrive while its call is out, then they wait for it and leave together in one call, and each is deducted once", async () => {
    const { scripts, here, local } = shardsAround();
    const shards = local.slice(0, 6);
    expect(shards.length).toBe(6);
    for (const s of shards) await scripts.shardInit(s, 1000, 0);
    const ack = new ReplicaAck(a.app.redis, 2000);
    let out = 0;
    let mostOut = 0;
    let calls = 0;
    let allSent = () => {};
    const wavesSent = new Promise<void>((r) => {
      allSent = r;
    });
    const batcher = new ShardBatcher(scripts, {
      max: 64,
      waitUs: 0,
      vouch: true,
      beforeWrite: (key) => a.app.redis.slots[slotOf(key)]![0]!,
      afterWrite: (key, before) => ack.afterWrite(key, before),
      onMaster: async (node, commands) => {
        expect(node).toBe(here);
        out++;
        mostOut = Math.max(mostOut, out);
        // The first call is held out until every later wave has arrived.
        if (calls === 0) await wavesSent;
        try {
          const r = await ack.pipelineWithWait(node, commands);
          calls++;
          return r;
        } finally {
          out--;
        }
      },
    });
    const input = (requestId: string) => ({ requestId, userId: '', quantity: 1, perUserLimit: 0 });
    const waves: Promise<{ kind: string }>[] = [];
    // Wave 0 on shards 0-1 (the call out); waves 1 and 2 on shards 2-3 (parked, then queued behind their parked
    // batch) and 4-5, wave 3 on shards 0-1 again (queued behind the call out), a turn of the event loop apart.
    const plan = [
      [0, 1],
      [2, 3],
      [2, 3, 4, 5],
      [0, 1],
    ];
    for (const [w, on] of plan.entries()) {
      for (const i of on) for (let k = 0; k < 5; k++) waves.push(batcher.deduct(shards[i]!, input(`w${w}.${i}.${k}`)));
      // The next turn of the event loop: this wave's batch is taken (and sent or parked) before the next arrives.
      for (let t = 0; t < 2; t++) await new Promise((r) => setImmediate(r));
    }
    allSent();
    const answers = await Promise.all(waves);
    expect(answers.map((r) => r.kind)).toEqual(Array(50).fill('deducted'));
    expect(mostOut).toBe(1);
    // Wave 0 alone, then waves 1-3 together: shards 2-3 topped up with wave 2, shards 0-1 freed by the first call.
    expect(calls).toBe(2);
    const avail = await Promise.all(shards.map(async (s) => Number(await a.app.redis.hget(scripts.keys(s).shard, 'avail'))));
    expect(avail).toEqual([990, 990, 990, 990, 995, 995]);
    const again = await Promise.all(
      ['w0.0.0', 'w3.1.4', 'w2.2.2', 'w2.5.0'].map((r) => batcher.deduct(shards[Number(r.split('.')[1])]!, input(r))),
    );
    expect(again.map((r) => r.kind)).toEqual(['replay', 'replay', 'replay', 'replay']);
  });
});

describe("group commit under load: a gap between a master's calls", () => {
  it('when requests arrive for a master faster than gapFrom per round trip, then its next call waits out the gap and takes every wave that came meanwhile, a request cancelled while it waited is dropped, and once the rate falls the next call goes at once', async () => {
    const { scripts, here, local } = shardsAround();
    const shards = local.slice(0, 4);
    expect(shards.length).toBe(4);
    for (const s of shards) await scripts.shardInit(s, 1000, 0);
    const ack = new ReplicaAck(a.app.redis, 2000);
    const GAP_MS = 90;
    const sentAt: number[] = [];
    const sizes: number[] = [];
    const batcher = new ShardBatcher(scripts, {
      max: 64,
      waitUs: 0,
      gapUs: GAP_MS * 1000,
      gapFrom: 3,
      vouch: true,
      beforeWrite: (key) => a.app.redis.slots[slotOf(key)]![0]!,
      afterWrite: (key, before) => ack.afterWrite(key, before),
      onBatch: (n) => sizes.push(n),
      onMaster: (node, commands) => {
        expect(node).toBe(here);
        sentAt.push(performance.now());
        return ack.pipelineWithWait(node, commands);
      },
    });
    const input = (requestId: string) => ({ requestId, userId: '', quantity: 1, perUserLimit: 0 });
    const avail = async () => Promise.all(shards.map(async (s) => Number(await a.app.redis.hget(scripts.keys(s).shard, 'avail'))));

    // A first call warms the connection and the scripts; long after it, a call of 10 is slow traffic: no gap.
    expect((await batcher.deduct(shards[3]!, input('g.warm'))).kind).toBe('deducted');
    await sleep(300);
    // 10, and at once 40 more parked behind them: 40 arrived within one round trip, so the gap holds the next.
    const burst = Array.from({ length: 10 }, (_, k) => batcher.deduct(shards[0]!, input(`g0.${k}`)));
    await new Promise((r) => setImmediate(r));
    for (const i of [1, 2]) for (let k = 0; k < 20; k++) burst.push(batcher.deduct(shards[i]!, input(`b${i}.${k}`)));
    expect((await Promise.all(burst)).map((r) => r.kind)).toEqual(Array(50).fill('deducted'));
    // Three waves 5 ms apart, well inside the gap; one request of the second is cancelled while it waits.
    const cancel = new AbortController();
    const waves: Promise<{ kind: string }>[] = [];
    let cancelled: Promise<unknown> | undefined;
    for (const w of [1, 2, 3]) {
      for (let k = 0; k < 3; k++) waves.push(batcher.deduct(shards[w]!, input(`g${w}.${k}`)));
      if (w === 2) cancelled = batcher.deduct(shards[2]!, input('g2.cancelled'), cancel.signal).catch((err: unknown) => err);
      await sleep(5);
    }
    cancel.abort();
    const second = await Promise.all(waves);
    expect(second.map((r) => r.kind)).toEqual(Array(9).fill('deducted'));
    expect(((await cancelled) as { kind?: string }).kind).toBe('deadline_exceeded');
    // warm-up, the 10, the 40 as soon as the 10 were back, then the waves together, a gap after the 40 left.
    expect(sentAt).toHaveLength(4);
    expect(sentAt[2]! - sentAt[1]!).toBeLessThan(GAP_MS / 2);
    // Node's timers run on the loop's millisecond clock, cached per turn: one can fire up to ~2 ms early by
    // performance.now() (CI read 88.8 for a 90 ms gap). Without the gap this is the waves' ~10 ms.
    expect(sentAt[3]! - sentAt[2]!).toBeGreaterThanOrEqual(GAP_MS - 2);
    expect(sizes.reduce((n, x) => n + x, 0)).toBe(60);
    // 9 in 90 ms is slow again: the next call leaves at once, not a gap after the last.
    const before = performance.now();
    expect((await batcher.deduct(shards[0]!, input('g4.0'))).kind).toBe('deducted');
    expect(sentAt).toHaveLength(5);
    expect(sentAt[4]! - before).toBeLessThan(GAP_MS / 2);
    // Each deducted once; the cancelled one not at all.
    expect(await avail()).toEqual([989, 977, 977, 996]);
    const again = await Promise.all([batcher.deduct(shards[0]!, input('g0.3')), batcher.deduct(shards[2]!, input('g2.1'))]);
    expect(again.map((r) => r.kind)).toEqual(['replay', 'replay']);
    expect((await batcher.deduct(shards[2]!, input('g2.cancelled'))).kind).toBe('deducted');
    expect(await avail()).toEqual([989, 977, 976, 996]);
  });
});
