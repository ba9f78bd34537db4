// Request records and claims are fields of per-shard hashes bucketed by time (lua/includes/buckets.lua): a
// record must be honoured for the whole idempotency window across a bucket boundary and whatever clock the
// calling instance has, within half a window of Redis's; a call that would name the wrong hashes is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstBucket } from '../src/redis/keys.js';
import { RedisHoldStore } from '../src/redis/hold-store.js';
import { RecordReadBatcher } from '../src/redis/record-read-batcher.js';
import { Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp();
});
afterAll(async () => {
  await a?.close();
});

const WINDOW_S = 4;

/** A fresh one-shard coupon's shard, with stock, and Scripts whose clock is `skewMs` off the machine's. */
async function shardWith(stock: number) {
  const id = uniqueId();
  const shard = { couponId: id, index: 0, tag: `${id}#0.0` };
  const at = (skewMs: number) => new Scripts(a.app.redis, a.namespace, WINDOW_S, () => Date.now() + skewMs);
  await at(0).shardInit(shard, stock, 0);
  return { shard, at };
}

const input = (requestId: string, userId = 'u1', quantity = 1, perUserLimit = 0) => ({ requestId, userId, quantity, perUserLimit });

/** Waits until the server's bucket changes (a boundary of the window-wide buckets passes). */
async function crossBoundary(): Promise<void> {
  const bucketNow = async () => Math.floor(Number((await a.app.redis.time())[0]) / WINDOW_S);
  const start = await bucketNow();
  while ((await bucketNow()) === start) await new Promise((r) => setTimeout(r, 50));
}

describe('bucketed request records', () => {
  it('when a record was written in the previous bucket, then a retry after the boundary still replays it, and so does a compensation', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    expect(await s.deduct(shard, input('r1', 'u1', 2), [], '', 1)).toEqual({ kind: 'deducted', remaining: 8 });
    await crossBoundary();
    expect(await s.deduct(shard, input('r1', 'u1', 2), [], '', 1)).toEqual({ kind: 'replay', remaining: 8, compensated: false });
    expect(await s.compensate(shard, 'r1', 'refund', false)).toEqual({ kind: 'compensated', remaining: 10, quantity: 2 });
    expect(await s.deduct(shard, input('r1', 'u1', 2), [], '', 1)).toEqual({ kind: 'replay', remaining: 8, compensated: true });
    expect(await s.compensate(shard, 'r1', 'refund', false)).toEqual({ kind: 'already', remaining: 10 });
  });

  it('when instances whose clocks are up to 0.45 window apart deduct the same requests, then each is deducted once', async () => {
    const { shard, at } = await shardWith(100);
    const skews = [-0.45, -0.2, 0, 0.2, 0.45].map((f) => at(f * WINDOW_S * 1000));
    const ids = Array.from({ length: 20 }, (_, i) => `sk${i}`);
    const answers = await Promise.all(ids.flatMap((id) => skews.map((s) => s.deduct(shard, input(id), [], '', 1))));
    expect(answers.filter((r) => r.kind === 'deducted')).toHaveLength(ids.length);
    expect(answers.filter((r) => r.kind === 'replay')).toHaveLength(ids.length * (skews.length - 1));
    expect(Number(await a.app.redis.hget(at(0).keys(shard).shard, 'avail'))).toBe(100 - ids.length);
    // Any of them finds any record, also across a boundary.
    await crossBoundary();
    for (const s of skews) expect(await s.recordRead(shard, 'sk3')).toMatchObject({ quantity: 1 });
  });

  // Within half a window a call is always served; from half to one and a half it depends on where in its
  // bucket the server's clock is (served only when the three hashes still hold the two live ones); beyond, never.
  it("when an instance's clock is more than 1.5 windows off the server's, then its calls are refused and change nothing", async () => {
    const { shard, at } = await shardWith(10);
    expect((await at(0).deduct(shard, input('seen'), [], '', 1)).kind).toBe('deducted');
    for (const skew of [-1.6, 1.6]) {
      const off = at(skew * WINDOW_S * 1000);
      await expect(off.deduct(shard, input(`off${skew}`), [], '', 1)).rejects.toThrow(/clock/);
      await expect(off.claim(shard, `off${skew}`, 'u1|1', 60)).rejects.toThrow(/clock/);
      await expect(off.compensate(shard, 'seen', 'refund', false)).rejects.toThrow(/clock/);
      await expect(off.recordRead(shard, 'seen')).rejects.toThrow(/clock/);
      await expect(off.claimRead(shard, 'seen')).rejects.toThrow(/clock/);
      await expect(off.refuseMark(shard, 'seen')).rejects.toThrow(/clock/);
    }
    expect(Number(await a.app.redis.hget(at(0).keys(shard).shard, 'avail'))).toBe(9);
    expect(await at(0).recordRead(shard, 'seen')).toMatchObject({ quantity: 1, compensated: false });
  });

  it('when a user reaches the per-user limit, then the count lives in the shard users hash and a compensation gives it back', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    expect((await s.deduct(shard, input('l1', 'ux', 2, 3), [], '', 1)).kind).toBe('deducted');
    expect(await s.deduct(shard, input('l2', 'ux', 2, 3), [], '', 1)).toEqual({ kind: 'user_limit', held: 2 });
    expect(await a.app.redis.hget(s.keys(shard).users, 'ux')).toBe('2');
    expect((await s.compensate(shard, 'l1', 'refund', true)).kind).toBe('compensated');
    expect(await a.app.redis.hget(s.keys(shard).users, 'ux')).toBe('0');
    expect((await s.deduct(shard, input('l2', 'ux', 2, 3), [], '', 1)).kind).toBe('deducted');
  });

  it('when records are restored, then an existing one is never overwritten and a restored one replays; a refusal mark sticks', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    expect((await s.deduct(shard, input('kept', 'u1', 1), [], '', 1)).kind).toBe('deducted');
    const occurredAt = Date.now() - 1000;
    expect(await s.recordRestore(shard, { requestId: 'kept', userId: 'u2', quantity: 5, occurredAt, compensated: false })).toBe(false);
    expect(await s.recordRestore(shard, { requestId: 'back', userId: 'u3', quantity: 4, occurredAt, compensated: true })).toBe(true);
    expect(await s.recordRead(shard, 'kept')).toMatchObject({ userId: 'u1', quantity: 1 });
    expect(await s.recordRead(shard, 'back')).toMatchObject({ userId: 'u3', quantity: 4, compensated: true, deductedAt: occurredAt });
    expect(await s.deduct(shard, input('back', 'u3', 4), [], '', 1)).toEqual({ kind: 'replay', remaining: 0, compensated: true });
    expect(await s.refuseMark(shard, 'kept')).toBe('marked');
    expect(await s.refuseMark(shard, 'never')).toBe('gone');
    expect(await s.recordRead(shard, 'kept')).toMatchObject({ refused: true, compensated: false });
  });

  it('when a canonical UUID is the request id, then its field is packed to 17 bytes and still tells ids apart', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    const id = '0b6f3c4e-9a1d-4f2b-8c7e-5d4a3b2c1f00';
    expect((await s.deduct(shard, input(id), [], '', 1)).kind).toBe('deducted');
    expect((await s.deduct(shard, input(id.toUpperCase()), [], '', 1)).kind).toBe('deducted');
    expect((await s.deduct(shard, input(id), [], '', 1)).kind).toBe('replay');
    const first = firstBucket(Date.now(), WINDOW_S);
    const fields = (await Promise.all([0, 1, 2].map((i) => a.app.redis.hkeysBuffer(s.keys(shard).records(first + i))))).flat();
    expect(fields.map((f) => f.length).sort()).toEqual([17, 36]);
  });

  it('when many records of one shard are read in one call, then each request gets its own record or null, also across a boundary', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    const uuid = '0b6f3c4e-9a1d-4f2b-8c7e-5d4a3b2c1f01';
    expect((await s.deduct(shard, input('old', 'u1', 2), [], '', 1)).kind).toBe('deducted');
    await crossBoundary();
    expect((await s.deduct(shard, input(uuid, 'u2', 1), [], '', 1)).kind).toBe('deducted');
    expect((await s.compensate(shard, uuid, 'refund', false)).kind).toBe('compensated');
    const recs = await s.recordReads(shard, ['none', 'old', uuid, 'old', 'none2']);
    if (recs === 'missing') throw new Error('the shard is there');
    expect(recs.map((r) => r && { userId: r.userId, quantity: r.quantity, compensated: r.compensated })).toEqual([
      null,
      { userId: 'u1', quantity: 2, compensated: false },
      { userId: 'u2', quantity: 1, compensated: true },
      { userId: 'u1', quantity: 2, compensated: false },
      null,
    ]);
    // The batcher: reads of one shard made together share a call, and each caller gets its own answer.
    const sizes: number[] = [];
    const batcher = new RecordReadBatcher(s, 64, (n) => sizes.push(n));
    const answers = await Promise.all(['old', 'none', uuid].map((id) => batcher.read(shard, id)));
    expect(answers.map((r) => (r === 'missing' ? r : (r?.quantity ?? null)))).toEqual([2, null, 1]);
    expect(sizes).toEqual([3]);
    const off = new RecordReadBatcher(at(1.6 * WINDOW_S * 1000), 64);
    await expect(Promise.all([off.read(shard, 'old'), off.read(shard, 'none')])).rejects.toThrow(/clock/);
  });

  it('when the shard hash is gone (its master lost its data), then a read answers missing, alone or batched, never "no record"', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    expect((await s.deduct(shard, input('was', 'u1', 1), [], '', 1)).kind).toBe('deducted');
    expect(await s.recordRead(shard, 'was')).toMatchObject({ quantity: 1 });
    // Only the shard hash goes: even with the record hashes still there, nothing read is trusted.
    await a.app.redis.del(s.keys(shard).shard);
    expect(await s.recordRead(shard, 'was')).toBe('missing');
    expect(await s.recordRead(shard, 'never')).toBe('missing');
    expect(await s.recordReads(shard, ['was', 'never'])).toBe('missing');
    const batcher = new RecordReadBatcher(s, 64);
    expect(await Promise.all(['was', 'never'].map((id) => batcher.read(shard, id)))).toEqual(['missing', 'missing']);
  });

  it('when holds were reserved on both sides of a bucket boundary, then a hold read finds each in its own bucket hash, tells a deduction apart and finds no other id', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    const holds = new RedisHoldStore(a.app.redis, { namespace: a.namespace, idempotencyWindowS: WINDOW_S });
    const reserve = (id: string, user: string, q: number) => holds.reserve(shard, { ...input(id, user, q), ttlMs: 2000 }, []);
    expect((await reserve('before', 'u1', 2)).kind).toBe('deducted');
    await crossBoundary();
    expect((await reserve('after', 'u2', 3)).kind).toBe('deducted');
    expect((await s.deduct(shard, input('plain', 'u3', 1), [], '', 1)).kind).toBe('deducted');
    // The read asks the three bucket hashes at once (HoldStore.read): the holds sit in two different ones.
    const bucketOf = async (id: string) => {
      const { keys, field } = s.recordPlaces(shard, id);
      const found = await Promise.all(keys.map((k) => a.app.redis.hexists(k, field as string)));
      return found.indexOf(1);
    };
    const [older, newer] = [await bucketOf('before'), await bucketOf('after')];
    expect(older).toBeGreaterThanOrEqual(0);
    expect(newer).toBe(older + 1);
    expect(await holds.read(shard, 'before')).toMatchObject({ userId: 'u1', quantity: 2, confirmed: 0 });
    expect(await holds.read(shard, 'after')).toMatchObject({ userId: 'u2', quantity: 3, confirmed: 0 });
    expect(await holds.read(shard, 'plain')).toBe('deduction');
    expect(await holds.read(shard, 'never')).toBeNull();
    await a.app.redis.del(s.keys(shard).shard);
    expect(await holds.read(shard, 'never')).toBe('missing');
  });
});

describe('record read batcher', () => {
  /** Real record reads, each held until the test lets it go: a call "in flight" for as long as the test likes. */
  function heldReads(s: Scripts) {
    const calls: { ids: string[]; go: () => void }[] = [];
    const scripts = {
      recordReads: async (shard: Parameters<Scripts['recordReads']>[0], ids: readonly string[]) => {
        await new Promise<void>((go) => calls.push({ ids: [...ids], go }));
        return s.recordReads(shard, ids);
      },
      keys: s.keys.bind(s),
      nodeReadCommand: s.nodeReadCommand.bind(s),
      parseNodeRead: s.parseNodeRead.bind(s),
      recordReadArgs: s.recordReadArgs.bind(s),
      parseRecordReads: s.parseRecordReads.bind(s),
    };
    return { scripts, calls };
  }
  const turn = () => new Promise((r) => setImmediate(r));

  it('when reads of one shard arrive while its call is in flight, then they wait and go together in the next call, one call at a time', async () => {
    const { shard, at } = await shardWith(10);
    const s = at(0);
    expect((await s.deduct(shard, input('had', 'u1', 1), [], '', 1)).kind).toBe('deducted');
    const { scripts, calls } = heldReads(s);
    const sizes: number[] = [];
    const batcher = new RecordReadBatcher(scripts, 64, (n) => sizes.push(n));
    const first = batcher.read(shard, 'had');
    await turn();
    expect(calls).toHaveLength(1);
    // Three more turns, three more reads: none is sent while the first call is in flight.
    const later: Promise<unknown>[] = [];
    for (const id of ['a', 'had', 'b']) {
      later.push(batcher.read(shard, id));
      await turn();
    }
    expect(calls).toHaveLength(1);
    calls[0]!.go();
    expect(await first).toMatchObject({ quantity: 1 });
    await turn();
    expect(calls.map((c) => c.ids)).toEqual([['had'], ['a', 'had', 'b']]);
    calls[1]!.go();
    const answers = await Promise.all(later);
    expect(answers.map((r) => (r && r !== 'missing' ? (r as { quantity: number }).quantity : r))).toEqual([null, 1, null]);
    expect(sizes).toEqual([1, 3]);
    expect(batcher.sent).toEqual({ calls: 2, reads: 4 });
  });

  it("when a shard's call hangs, then its next reads are sent beside it after 100 ms instead of waiting for it", async () => {
    const { shard, at } = await shardWith(10);
    const { scripts, calls } = heldReads(at(0));
    const batcher = new RecordReadBatcher(scripts, 64);
    const stuck = batcher.read(shard, 'x');
    await turn();
    const started = Date.now();
    const next = batcher.read(shard, 'y');
    // The hung call is never let go until the end; the next read's call goes once the shard is released.
    while (calls.length < 2 && Date.now() - started < 2000) await new Promise((r) => setTimeout(r, 10));
    expect(calls).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    calls[1]!.go();
    expect(await next).toBeNull();
    calls[0]!.go();
    expect(await stuck).toBeNull();
  });
});
