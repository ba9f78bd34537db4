// The sold-out fast path's record reads go in one call per master (lua/node-read-1.lua on the master's own
// connection, record-read-batcher.ts with a NodeReadTransport). That path has no cluster-client routing and no
// NOSCRIPT fallback: a shard on another node, a node that forgot its scripts, a missing connection and a
// client with a stale slot map must each still give every read its true answer (a replay's record is what
// keeps a retried winner from being told SOLD_OUT), and a lost shard must answer 'missing', never "no record".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShardRef } from '../src/domain/ports.js';
import { luaScript } from '../src/redis/cluster.js';
import { loadOnMaster, masterOf, sendOnMaster } from '../src/redis/master-pipeline.js';
import { type NodeReadTransport, RecordReadBatcher } from '../src/redis/record-read-batcher.js';
import type { RequestRecord } from '../src/redis/request-record.js';
import { type Arg, type Reply, Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp();
});
afterAll(async () => {
  await a?.close();
});

const WINDOW_S = 60;
const input = (requestId: string) => ({ requestId, userId: `u-${requestId}`, quantity: 1, perUserLimit: 0 });
const turn = () => new Promise((r) => setImmediate(r));

/** `count` shards of a new coupon, each with 10 units and one deduction `<tag>/won` recorded on it. */
async function shardsWithRecords(count: number, skewMs = 0) {
  const scripts = new Scripts(a.app.redis, a.namespace, WINDOW_S, () => Date.now() + skewMs);
  const id = uniqueId();
  const shards: ShardRef[] = Array.from({ length: count }, (_, i) => ({ couponId: id, index: i, tag: `${id}#${i}.0` }));
  for (const s of shards) {
    await scripts.shardInit(s, 10, 0);
    expect((await scripts.deduct(s, input(`${s.tag}/won`), [], '', 1)).kind).toBe('deducted');
  }
  const owner = (s: ShardRef) => masterOf(a.app.redis, scripts.keys(s).shard)!;
  return { scripts, shards, owner };
}

/** The real transport (as stock-store.ts builds it), counting the calls per master; `route` may lie. */
function transport(route?: (key: string) => string | undefined) {
  const calls: { node: string; shards: number; asking: boolean }[] = [];
  const loads: string[] = [];
  let redirects = 0;
  const t: NodeReadTransport = {
    masterOf: route ?? ((key) => masterOf(a.app.redis, key)),
    send: async (node: string, command: readonly Arg[], asking?: boolean) => {
      // evalsha, sha, 1, routing key, then 7 values and the ids per shard (a read sent alone: eval, lua, 4 keys)
      let shards = 0;
      if (command[0] === 'eval') shards = 1;
      else for (let i = 4; i < command.length; i += 7 + Number(command[i + 6])) shards++;
      calls.push({ node, shards, asking: asking === true });
      return (await sendOnMaster(a.app.redis, node, asking ? [['asking'], command] : [command]))?.at(-1);
    },
    loadScript: (node, lua) => {
      loads.push(node);
      loadOnMaster(a.app.redis, node, lua);
    },
    onRedirect: () => {
      redirects++;
    },
  };
  return { t, calls, loads, redirects: () => redirects };
}

/** Every shard's `won` read and one never-made read, all in one turn: the answers, as quantities or null. */
async function readAll(batcher: RecordReadBatcher, shards: ShardRef[]) {
  const won = shards.map((s) => batcher.read(s, `${s.tag}/won`));
  const never = shards.map((s) => batcher.read(s, `${s.tag}/never`));
  const q = (r: RequestRecord | null | 'missing') => (r && r !== 'missing' ? r.quantity : r);
  return { won: (await Promise.all(won)).map(q), never: (await Promise.all(never)).map(q) };
}

describe('record reads, one call per master', () => {
  it("when reads of shards on every master arrive together, then each master gets one call and every read its shard's answer", async () => {
    const { scripts, shards, owner } = await shardsWithRecords(12);
    const masters = new Set(shards.map(owner));
    expect(masters.size).toBeGreaterThan(1);
    const { t, calls } = transport();
    const sizes: number[] = [];
    const batcher = new RecordReadBatcher(scripts, 64, (n) => sizes.push(n), t);
    const r = await readAll(batcher, shards);
    expect(r.won).toEqual(shards.map(() => 1));
    expect(r.never).toEqual(shards.map(() => null));
    expect(calls).toHaveLength(masters.size);
    expect(calls.reduce((n, c) => n + c.shards, 0)).toBe(12);
    expect(sizes.every((n) => n === 2)).toBe(true);
    expect(batcher.sent).toEqual({ calls: masters.size, reads: 24 });
  });

  it("when a master's call is in flight, then reads for its shards wait and leave together in its next call", async () => {
    const { scripts, shards, owner } = await shardsWithRecords(6);
    const node = owner(shards[0]!);
    const mine = shards.filter((s) => owner(s) === node);
    const held: (() => void)[] = [];
    const { t, calls } = transport();
    const send = t.send;
    t.send = async (n, c) => {
      await new Promise<void>((go) => held.push(go));
      return send(n, c);
    };
    const batcher = new RecordReadBatcher(scripts, 64, undefined, t);
    const first = batcher.read(mine[0]!, `${mine[0]!.tag}/won`);
    await turn();
    expect(held).toHaveLength(1);
    const later = mine.flatMap((s) => [batcher.read(s, `${s.tag}/won`), batcher.read(s, 'x')]);
    for (let i = 0; i < 3; i++) await turn();
    expect(held).toHaveLength(1);
    held[0]!();
    expect(await first).toMatchObject({ quantity: 1 });
    while (held.length < 2) await turn();
    held[1]!();
    const answers = await Promise.all(later);
    expect(answers.map((r) => (r && r !== 'missing' ? r.quantity : r))).toEqual(mine.flatMap(() => [1, null]));
    expect(calls).toEqual([
      { node, shards: 1, asking: false },
      { node, shards: mine.length, asking: false },
    ]);
  });

  it("when a node's call holds a shard another master serves, then that shard is answered -10 with no values, and the node's own shards are read", async () => {
    const { scripts, shards, owner } = await shardsWithRecords(8);
    const node = owner(shards[0]!);
    const away = shards.find((s) => owner(s) !== node)!;
    const groups = [shards[0]!, away].map((s) => ({ shard: s, requestIds: [`${s.tag}/won`, 'n'] }));
    const conn = a.app.redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === node)!;
    const nr = luaScript('nodeRead');
    await conn.script('LOAD', nr.lua);
    const [, , ...args] = scripts.nodeReadCommand(groups);
    const reply = (await conn.call('evalsha', nr.sha, ...(args as (string | number)[]))) as Reply;
    expect(reply.slice(3)).toEqual([-10, '', '']);
    const parsed = scripts.parseNodeRead(groups, reply);
    expect(parsed[1]).toBe('elsewhere');
    expect((parsed[0] as (RequestRecord | null)[]).map((r) => r?.quantity ?? null)).toEqual([1, null]);
  });

  it("when the client's slot map names the wrong master for some shards, then those are read on their own and still answered truly", async () => {
    const { scripts, shards, owner } = await shardsWithRecords(9);
    const masters = [...new Set(shards.map(owner))];
    // Every shard routed to the first master: the others' reads come back -10 and go through the cluster client.
    const { t, calls, redirects } = transport(() => masters[0]);
    const batcher = new RecordReadBatcher(scripts, 64, undefined, t);
    const r = await readAll(batcher, shards);
    expect(r.won).toEqual(shards.map(() => 1));
    expect(r.never).toEqual(shards.map(() => null));
    expect(calls).toHaveLength(1);
    expect(redirects()).toBe(shards.filter((s) => owner(s) !== masters[0]).length);
  });

  it('when the masters forgot their scripts, then the reads are answered through the cluster client and the script is loaded for the next call', async () => {
    const { scripts, shards } = await shardsWithRecords(6);
    for (const node of a.app.redis.nodes('master')) await node.script('FLUSH');
    const { t, calls, loads } = transport();
    const batcher = new RecordReadBatcher(scripts, 64, undefined, t);
    const r = await readAll(batcher, shards);
    expect(r.won).toEqual(shards.map(() => 1));
    expect(r.never).toEqual(shards.map(() => null));
    expect(loads.length).toBe(calls.length);
    // Loaded in the background: the next round goes on the masters' connections.
    await new Promise((res) => setTimeout(res, 200));
    const again = transport();
    const next = new RecordReadBatcher(scripts, 64, undefined, again.t);
    expect((await readAll(next, shards)).won).toEqual(shards.map(() => 1));
    expect(again.loads).toEqual([]);
  });

  it('when a master has no ready connection, then its reads go through the cluster client', async () => {
    const { scripts, shards } = await shardsWithRecords(4);
    const { t } = transport();
    t.send = async () => undefined;
    const batcher = new RecordReadBatcher(scripts, 64, undefined, t);
    const r = await readAll(batcher, shards);
    expect(r.won).toEqual(shards.map(() => 1));
    expect(r.never).toEqual(shards.map(() => null));
  });

  it("when a shard's hash is gone, then its reads answer 'missing' (never 'no record') and its neighbours in the call are unaffected", async () => {
    const { scripts, shards, owner } = await shardsWithRecords(8);
    const node = owner(shards[0]!);
    const [lost, kept] = shards.filter((s) => owner(s) === node);
    expect(kept).toBeDefined();
    await a.app.redis.del(scripts.keys(lost!).shard);
    const { t, calls } = transport();
    const batcher = new RecordReadBatcher(scripts, 64, undefined, t);
    const answers = await Promise.all([lost!, kept!].flatMap((s) => [batcher.read(s, `${s.tag}/won`), batcher.read(s, 'n')]));
    expect(answers.map((r) => (r && r !== 'missing' ? r.quantity : r))).toEqual(['missing', 'missing', 1, null]);
    expect(calls).toHaveLength(1);
  });

  it("when this instance's clock is more than 1.5 windows off Redis's, then the reads fail with the clock message instead of naming the wrong hashes", async () => {
    const { shards } = await shardsWithRecords(3);
    const skewed = new Scripts(a.app.redis, a.namespace, WINDOW_S, () => Date.now() + 2 * WINDOW_S * 1000);
    const { t } = transport();
    const batcher = new RecordReadBatcher(skewed, 64, undefined, t);
    const r = await Promise.allSettled(shards.map((s) => batcher.read(s, `${s.tag}/won`)));
    for (const x of r) {
      expect(x.status).toBe('rejected');
      expect(String((x as PromiseRejectedResult).reason)).toMatch(/clock/);
    }
  });

  it('when more reads wait for one master than a call carries, then they go in several calls, each read answered once', async () => {
    const { scripts, shards, owner } = await shardsWithRecords(2);
    const { t, calls } = transport();
    const batcher = new RecordReadBatcher(scripts, 8, undefined, t);
    const reads = shards.flatMap((s) => Array.from({ length: 30 }, (_, i) => batcher.read(s, i === 7 ? `${s.tag}/won` : `${s.tag}/n${i}`)));
    const answers = await Promise.all(reads);
    const expected = shards.flatMap(() => Array.from({ length: 30 }, (_, i) => (i === 7 ? 1 : null)));
    expect(answers.map((r) => (r && r !== 'missing' ? r.quantity : r))).toEqual(expected);
    // 8 per shard and call: at least 4 calls for the shards of one master.
    const perMaster = new Map<string, number>();
    for (const s of shards) perMaster.set(owner(s), (perMaster.get(owner(s)) ?? 0) + 30);
    for (const [node, n] of perMaster) expect(calls.filter((c) => c.node === node).length).toBeGreaterThanOrEqual(Math.ceil(n / 16));
  });

  // A shard read alone goes through the cluster client, whose auto-pipelined batches hand a redirect back raw
  // (src/redis/cluster.ts): the read follows it by hand to the node it names, with ASKING for an ASK.
  for (const kind of ['MOVED', 'ASK'] as const) {
    it(`when a read sent alone comes back ${kind}, then it is asked again of the node named${kind === 'ASK' ? ', after ASKING,' : ''} and answered truly`, async () => {
      const { scripts, shards, owner } = await shardsWithRecords(2);
      const shard = shards[0]!;
      let redirected = 0;
      const raw = Object.create(scripts) as Scripts;
      raw.recordReads = async (s, ids) => {
        if (redirected++ === 0) throw new Error(`${kind} 1234 ${owner(s)}`);
        return scripts.recordReads(s, ids);
      };
      // No master known for the slot: the shard is read alone.
      const { t, calls, redirects } = transport(() => undefined);
      const batcher = new RecordReadBatcher(raw, 64, undefined, t);
      const [won, never] = await Promise.all([batcher.read(shard, `${shard.tag}/won`), batcher.read(shard, `${shard.tag}/never`)]);
      expect(won).toMatchObject({ quantity: 1 });
      expect(never).toBeNull();
      expect(redirected).toBe(1);
      expect(calls).toEqual([{ node: owner(shard), shards: 1, asking: kind === 'ASK' }]);
      // MOVED says the client's map is stale; ASK does not (the slot is only half moved).
      expect(redirects()).toBe(kind === 'MOVED' ? 1 : 0);
    });
  }
});
