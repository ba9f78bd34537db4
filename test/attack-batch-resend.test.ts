// Attack on ShardBatcher's re-send (src/redis/shard-batcher.ts): a batch whose connection closed is sent again.
// The worst case for that re-send is a batch that DID run on the server and only lost its reply. Simulated
// here on the real cluster: the first shard-batch-8.lua call runs for real, then its reply is replaced by
// ioredis's "Connection is closed." error. The re-sent batch must answer every request as a replay of what the
// first run did — no unit deducted twice, no compensation given twice, no per-user count counted twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeductScriptInput, ShardRef } from '../src/domain/ports.js';
import { type BatchOp, type BatchReply, Scripts } from '../src/redis/scripts.js';
import { ShardBatcher, type ShardBatcherOptions } from '../src/redis/shard-batcher.js';
import { masterOf, sendOnMaster } from '../src/redis/master-pipeline.js';
import { fromOutboxEntry } from '../src/settlement/event.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_INSTANCE_ID: 'atk-resend' });
});
afterAll(async () => {
  await a?.close();
});

/** The first `failing` batch calls fail: 'lost-reply' runs the batch for real and then loses its reply, as a
 * closed connection would; 'redirected' refuses it with a MOVED before it runs, as a node that no longer owns
 * the slot does. */
class FailingBatches extends Scripts {
  calls = 0;
  /** The redirect a refused call gets. */
  redirectTo = 'MOVED 1234 127.0.0.1:7001';
  constructor(
    app: TestApp,
    private failing: number,
    private how: 'lost-reply' | 'redirected',
  ) {
    super(app.app.redis, app.namespace, app.app.config.idempotencyWindowS);
  }
  override async shardBatch(shard: ShardRef, ops: readonly BatchOp[], vouch: boolean): Promise<BatchReply[]> {
    const fails = this.calls++ < this.failing;
    if (fails && this.how === 'redirected') throw new Error(this.redirectTo);
    const replies = await super.shardBatch(shard, ops, vouch);
    if (fails) throw new Error('Connection is closed.');
    return replies;
  }
}

/** A batcher over `scripts` with no master known (every batch takes the cluster client's path) and no ack wait. */
const batcherOver = (scripts: Scripts, more: Partial<ShardBatcherOptions> = {}) =>
  new ShardBatcher(scripts, { max: 64, waitUs: 0, vouch: false, beforeWrite: () => undefined, afterWrite: async () => {}, ...more });

const D = (requestId: string, userId: string, quantity: number, perUserLimit: number): DeductScriptInput => ({
  requestId,
  userId,
  quantity,
  perUserLimit,
});

describe('attack: a batch that ran but lost its reply is re-sent', () => {
  it('when the re-sent batch mixes deducts, a compensate of the same id, duplicates and a per-user limit edge, then each request is applied once and answered as a replay of it', async () => {
    const id = uniqueId('rs');
    const shard: ShardRef = { couponId: id, index: 0, tag: `${id}#0.0` };
    const scripts = new FailingBatches(a, 1, 'lost-reply');
    await scripts.shardInit(shard, 10, 0);
    const batcher = batcherOver(scripts);
    const calls = [
      batcher.deduct(shard, D('x', 'u1', 2, 3)),
      batcher.compensate(shard, 'x', 'refund', true),
      batcher.deduct(shard, D('y', 'u1', 1, 3)), // u1 at 1 after x was given back: fits
      batcher.deduct(shard, D('y', 'u1', 1, 3)), // the same id again
      batcher.deduct(shard, D('z', 'u1', 3, 3)), // would pass the limit of 3 (1 + 3)
      batcher.deduct(shard, D('w', 'u2', 3, 3)), // exactly at the limit
    ];
    const replies = await Promise.all(calls);
    expect(scripts.calls).toBe(2); // sent, then re-sent once
    // The first run did everything; the re-send found it done.
    expect(replies.map((r) => r.kind)).toEqual(['replay', 'already', 'replay', 'replay', 'user_limit', 'replay']);
    const k = scripts.keys(shard);
    const level = await a.app.redis.hgetall(k.shard);
    // 10 − x (2, given back) − y (1) − w (3) = 6; net 4.
    expect([Number(level.avail), Number(level.net)]).toEqual([6, 4]);
    expect(await a.app.redis.hgetall(k.users)).toEqual({ u1: '1', u2: '3' });
    // One outbox event per change: D x, C x, D y, D w.
    const events = (await a.app.redis.xrange(k.outbox, '-', '+')).flatMap(([, f]) =>
      fromOutboxEntry(f).map((e) => `${e.event?.kind}:${e.event?.requestId}`),
    );
    expect(events).toEqual(['D:x', 'C:x', 'D:y', 'D:w']);
  });
});

describe('attack: a batch redirected before it ran is re-sent', () => {
  it('when one MOVED comes back, then the batch runs once on the re-send and every request is answered as a first call', async () => {
    const id = uniqueId('mv');
    const shard: ShardRef = { couponId: id, index: 0, tag: `${id}#0.0` };
    const scripts = new FailingBatches(a, 1, 'redirected');
    await scripts.shardInit(shard, 3, 0);
    const batcher = batcherOver(scripts);
    const replies = await Promise.all([
      batcher.deduct(shard, D('a', 'u1', 1, 0)),
      batcher.deduct(shard, D('b', 'u2', 1, 0)),
      batcher.deduct(shard, D('a', 'u1', 1, 0)),
      batcher.deduct(shard, D('c', 'u3', 2, 0)),
    ]);
    expect(scripts.calls).toBe(2);
    expect(replies.map((r) => r.kind)).toEqual(['deducted', 'deducted', 'replay', 'short']);
    expect(Number((await a.app.redis.hgetall(scripts.keys(shard).shard)).avail)).toBe(1);
  });

  it('when the re-send is redirected again, then every request fails with the redirect (the caller retries) and nothing was deducted', async () => {
    const id = uniqueId('mv2');
    const shard: ShardRef = { couponId: id, index: 0, tag: `${id}#0.0` };
    const scripts = new FailingBatches(a, 2, 'redirected');
    await scripts.shardInit(shard, 3, 0);
    const batcher = batcherOver(scripts);
    const settled = await Promise.allSettled([batcher.deduct(shard, D('a', 'u1', 1, 0)), batcher.compensate(shard, 'a', 'r', false)]);
    expect(scripts.calls).toBe(2);
    expect(settled.map((s) => (s.status === 'rejected' ? String(s.reason) : s.status))).toEqual([
      'Error: MOVED 1234 127.0.0.1:7001',
      'Error: MOVED 1234 127.0.0.1:7001',
    ]);
    expect(Number((await a.app.redis.hgetall(scripts.keys(shard).shard)).avail)).toBe(3);
  });
});

// With node connections (onMaster), a redirect is followed by hand: the batch goes, with its keys declared, to
// the node the MOVED or ASK names (after ASKING for an ASK), and the requests are answered from that one run.
describe('attack: a redirected batch followed to the node named', () => {
  for (const kind of ['MOVED', 'ASK'] as const) {
    it(`when the cluster client's call comes back ${kind}, then the batch runs once on the node named and every request is answered as a first call`, async () => {
      const id = uniqueId('fw');
      const shard: ShardRef = { couponId: id, index: 0, tag: `${id}#0.0` };
      const scripts = new FailingBatches(a, 1, 'redirected');
      await scripts.shardInit(shard, 3, 0);
      const owner = masterOf(a.app.redis, scripts.keys(shard).shard)!;
      scripts.redirectTo = `${kind} 1234 ${owner}`;
      const sent: { node: string; first: string }[] = [];
      // No master known: the batch takes the cluster client's path, which comes back redirected.
      const batcher = batcherOver(scripts, {
        onMaster: async (node, commands) => {
          sent.push({ node, first: String(commands[0]![0]) });
          const results = await sendOnMaster(a.app.redis, node, commands);
          return results && { results, ack: null };
        },
      });
      const replies = await Promise.all([
        batcher.deduct(shard, D('a', 'u1', 1, 0)),
        batcher.deduct(shard, D('b', 'u2', 1, 0)),
        batcher.deduct(shard, D('a', 'u1', 1, 0)),
        batcher.compensate(shard, 'b', 'refund', false),
      ]);
      expect(scripts.calls).toBe(1);
      expect(sent).toEqual([{ node: owner, first: kind === 'ASK' ? 'asking' : 'eval' }]);
      expect(replies.map((r) => r.kind)).toEqual(['deducted', 'deducted', 'replay', 'compensated']);
      const level = await a.app.redis.hgetall(scripts.keys(shard).shard);
      expect([Number(level.avail), Number(level.net)]).toEqual([2, 1]);
    });
  }
});
