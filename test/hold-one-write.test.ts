// A hold call is one write on its shard's master (src/redis/hold-store.ts): the script, the read of the hold's
// record after it and, at the `replica` level, the WAIT. Its answers must be exactly those of the script run
// alone and read afterwards, and the calls must still land exactly once when the write cannot go as planned:
// the node has not cached the script, or the client's slot map names the wrong master.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import slotOf from 'cluster-key-slot';
import { connectCluster } from '../src/redis/cluster.js';
import { RedisHoldStore } from '../src/redis/hold-store.js';
import { orderKey } from '../src/redis/keys.js';
import { RedisOrderRecords } from '../src/redis/order-records.js';
import { ReplicaAck } from '../src/redis/replica-ack.js';
import { Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
let own: Cluster;
beforeAll(async () => {
  a = await startTestApp();
  // A client of the test's own, whose slot map the last test spoils for good; the app's client stays untouched.
  own = connectCluster({ nodes: [{ host: '127.0.0.1', port: 7001 }], slotsRefreshMs: 0 });
  await own.ping();
});
afterAll(async () => {
  own?.disconnect();
  await a?.close();
});

const WINDOW_S = 60;
const input = (requestId: string, userId: string, quantity: number) => ({ requestId, userId, quantity, perUserLimit: 0, ttlMs: 600_000 });

/** A fresh one-shard coupon's shard with `stock` units, and a hold store at the `replica` level on `client`. */
async function setUp(stock: number, client: Cluster = a.app.redis) {
  const id = uniqueId('ow');
  const shard = { couponId: id, index: 0, tag: `${id}#0.0` };
  const scripts = new Scripts(client, a.namespace, WINDOW_S);
  await scripts.shardInit(shard, stock, 0);
  const holds = new RedisHoldStore(client, {
    namespace: a.namespace,
    idempotencyWindowS: WINDOW_S,
    replicaAck: new ReplicaAck(client, 2000),
  });
  const avail = async () => Number(await a.app.redis.hget(scripts.keys(shard).shard, 'avail'));
  return { shard, scripts, holds, avail };
}

describe('hold calls in one write', () => {
  it('when holds are reserved, confirmed whole and in part, replayed, released and extended, then each answer carries the state a read afterwards finds, and the units add up', async () => {
    const { shard, holds, avail } = await setUp(10);
    for (const [id, q] of [
      ['h1', 3],
      ['h2', 2],
      ['h3', 1],
      ['h4', 1],
    ] as const)
      expect((await holds.reserve(shard, input(id, `u-${id}`, q), [])).kind).toBe('deducted');
    expect(await avail()).toBe(3);

    const whole = await holds.confirm(shard, 'h1', 0);
    expect(whole).toMatchObject({ kind: 'confirmed', kept: 3, released: 0, record: { state: 'c', confirmed: 3, userId: 'u-h1' } });
    expect(whole.record).toEqual(await holds.read(shard, 'h1'));
    const again = await holds.confirm(shard, 'h1', 0);
    expect(again).toMatchObject({ kind: 'replay', kept: 3 });
    expect(again.record).toEqual(whole.record);

    const part = await holds.confirm(shard, 'h2', 1);
    expect(part).toMatchObject({ kind: 'confirmed', kept: 1, released: 1, record: { state: 'c', confirmed: 1 } });
    expect(part.record).toEqual(await holds.read(shard, 'h2'));

    const released = await holds.release(shard, 'h3');
    expect(released).toMatchObject({ kind: 'released', released: 1, record: { state: 'r', quantity: 1 } });
    expect(released.record).toEqual(await holds.read(shard, 'h3'));
    expect(await holds.release(shard, 'h3')).toMatchObject({ kind: 'already_released', record: { state: 'r' } });

    const extended = await holds.extend(shard, 'h4', 900_000);
    expect(extended.kind).toBe('extended');
    expect(extended.record).toMatchObject({ state: 'h', quantity: 1 });
    expect((extended.record as { expiresAtMs: number }).expiresAtMs).toBe((extended as { expiresAtMs: number }).expiresAtMs);
    expect(extended.record).toEqual(await holds.read(shard, 'h4'));

    // Nothing under the id: no record to carry.
    expect(await holds.confirm(shard, 'never', 0)).toEqual({ kind: 'not_found' });
    // 10 - 3 (h1) - 1 (h2 kept) - 1 (h4 held); h2's other unit and h3's came back.
    expect(await avail()).toBe(5);
    expect(holds.sent.calls).toBe(11);
  });

  it("when every master's script cache is flushed between calls, then the next call of each script is sent again with its text, runs once, and the ones after go by SHA again", async () => {
    const { shard, holds, avail } = await setUp(10);
    expect((await holds.reserve(shard, input('f1', 'u1', 2), [])).kind).toBe('deducted');
    for (const node of a.app.redis.nodes('master')) await node.script('FLUSH');
    const before = holds.sent.loaded;

    expect(await holds.confirm(shard, 'f1', 0)).toMatchObject({ kind: 'confirmed', kept: 2, record: { state: 'c', confirmed: 2 } });
    expect((await holds.reserve(shard, input('f2', 'u2', 3), [])).kind).toBe('deducted');
    expect(await holds.release(shard, 'f2')).toMatchObject({ kind: 'released', released: 3, record: { state: 'r' } });
    expect(holds.sent.loaded - before).toBe(3);
    // Once each: the EVAL cached them.
    expect((await holds.reserve(shard, input('f3', 'u3', 1), [])).kind).toBe('deducted');
    expect(await holds.confirm(shard, 'f3', 0)).toMatchObject({ kind: 'confirmed', kept: 1 });
    expect(holds.sent.loaded - before).toBe(3);
    expect(holds.sent.calls).toBe(6);
    // Each ran once: f1's 2 and f3's 1 taken, f2's 3 back.
    expect(await avail()).toBe(7);
  });

  it("when the client's slot map names another master for the shard, then each call follows the MOVED to the shard's master, runs once there, and its answer and record are right", async () => {
    const { shard, scripts, holds, avail } = await setUp(10, own);
    const slot = slotOf(scripts.keys(shard).shard);
    const master = own.slots[slot]![0]!;
    const other = own.nodes('master').find((n) => `${n.options.host}:${n.options.port}` !== master)!;
    // The map stays wrong: nothing may refresh it (each MOVED asks for a refresh).
    own.refreshSlotsCache = () => {};
    own.slots[slot] = [`${other.options.host}:${other.options.port}`];
    expect((await holds.reserve(shard, input('m1', 'u1', 2), [])).kind).toBe('deducted');
    expect(await holds.confirm(shard, 'm1', 1)).toMatchObject({
      kind: 'confirmed',
      kept: 1,
      released: 1,
      record: { state: 'c', confirmed: 1 },
    });
    expect((await holds.reserve(shard, input('m2', 'u2', 3), [])).kind).toBe('deducted');
    expect(await holds.release(shard, 'm2')).toMatchObject({ kind: 'released', released: 3, record: { state: 'r' } });
    expect(own.slots[slot]![0]).not.toBe(master);
    // Exactly once each: m1's kept unit is the only one gone.
    expect(await avail()).toBe(9);
    expect(holds.sent).toMatchObject({ calls: 4, redirected: 4 });
  });

  it("when the shard's master has a connection the client never opened (ioredis opens them on first use), then the first hold call opens it and is answered, not refused after its retries", async () => {
    const fresh = connectCluster({ nodes: [{ host: '127.0.0.1', port: 7001 }], slotsRefreshMs: 0 });
    try {
      await new Promise((ready) => fresh.once('ready', ready));
      // The slot map was read through one of the pool's connections: a master whose connection is still unopened.
      const conn = fresh.nodes('master').find((n) => n.status === 'wait')!;
      expect(conn).toBeDefined();
      const nodeKey = `${conn.options.host}:${conn.options.port}`;
      const scripts = new Scripts(a.app.redis, a.namespace, WINDOW_S);
      const id = uniqueId('ow');
      let shard = { couponId: id, index: 0, tag: `${id}#0.0` };
      for (let i = 1; fresh.slots[slotOf(scripts.keys(shard).shard)]![0] !== nodeKey; i++) shard = { ...shard, tag: `${id}#0.${i}` };
      await scripts.shardInit(shard, 5, 0);
      const holds = new RedisHoldStore(fresh, {
        namespace: a.namespace,
        idempotencyWindowS: WINDOW_S,
        replicaAck: new ReplicaAck(fresh, 2000),
      });
      // A Confirm first: no index add through the cluster client opens the connection before the script's write.
      expect(conn.status).toBe('wait');
      expect(await holds.confirm(shard, 'none-yet', 0)).toEqual({ kind: 'not_found' });
      expect(conn.status).toBe('ready');
      expect((await holds.reserve(shard, input('w1', 'u1', 2), [])).kind).toBe('deducted');
      expect(await holds.confirm(shard, 'w1', 0)).toMatchObject({ kind: 'confirmed', kept: 2, record: { state: 'c' } });
      expect(Number(await a.app.redis.hget(scripts.keys(shard).shard, 'avail'))).toBe(3);
    } finally {
      fresh.disconnect();
    }
  });

  it("when order records are opened and moved through a client whose slot map names the wrong master, then each write follows the MOVED, a repeated open finds the record, and a move already made answers the other's decision", async () => {
    const fresh = connectCluster({ nodes: [{ host: '127.0.0.1', port: 7001 }], slotsRefreshMs: 0 });
    try {
      await new Promise((ready) => fresh.once('ready', ready));
      const records = new RedisOrderRecords(fresh, {
        namespace: a.namespace,
        idempotencyWindowS: WINDOW_S,
        replicaAck: new ReplicaAck(fresh, 2000),
      });
      const orderId = uniqueId('ow-order');
      const slot = slotOf(orderKey(a.namespace, orderId));
      const master = fresh.slots[slot]![0]!;
      const other = fresh.nodes('master').find((n) => `${n.options.host}:${n.options.port}` !== master)!;
      fresh.refreshSlotsCache = () => {};
      // Before each write: a write that vouches goes through the cluster client, whose MOVED repairs the entry.
      const spoil = () => {
        fresh.slots[slot] = [`${other.options.host}:${other.options.port}`];
      };
      const spec = { orderId, kind: 'deduct' as const, userId: 'u1', items: [{ couponId: 'c1', quantity: 1 }], ttlMs: 60_000 };
      spoil();
      expect(await records.open(spec, 1000)).toMatchObject({ kind: 'created', record: { state: 'pending' } });
      spoil();
      expect(await records.open(spec, 1001)).toMatchObject({ kind: 'found', record: { state: 'pending', createdMs: 1000 } });
      spoil();
      expect(await records.move(orderId, ['pending'], 'committed', 1002)).toMatchObject({ kind: 'moved', record: { state: 'committed' } });
      // Sent again (as after a closed connection): the record says what the first run decided.
      spoil();
      expect(await records.move(orderId, ['pending'], 'committed', 1003)).toMatchObject({ kind: 'other', record: { state: 'committed' } });
      expect(records.sent.calls).toBe(4);
      // At least one per write (a connection opened late can add one: the write's retry meets the MOVED again).
      expect(records.sent.redirected).toBeGreaterThanOrEqual(4);
      expect(await records.read(orderId)).toMatchObject({ state: 'committed', createdMs: 1000 });
    } finally {
      fresh.disconnect();
    }
  });
});
