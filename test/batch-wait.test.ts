// At the `replica` ack level the group commit sends a master's shard calls and their WAIT in one write
// (shard-batcher.ts sendWithWait, ReplicaAck.pipelineWithWait) by EVALSHA on the node's connection, so the
// client's own NOSCRIPT fallback is not there: a node that lost its scripts (it restarted, or is a freshly
// promoted replica) must cost a re-send and never a lost or doubled deduction. That the WAIT covers the calls
// before it (an answer only once a replica holds it) is test-faults/replica-ack.test.ts's: with a lagging
// replica, a WAIT sent ahead of the calls fails its two 'replica lags behind a deduction' cases.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { shardState } from './support/inspect.js';
import { ledgerFigures, settled } from './support/settlement.js';

let a: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle', SHARDSTOCK_ACK_LEVEL: 'replica' });
});
afterAll(async () => {
  await a?.close();
});

async function sale(couponId: string, requests: number, prefix: string) {
  const ids = Array.from({ length: requests }, (_, i) => `${prefix}${i}`);
  const answers = await Promise.all(ids.map((requestId) => a.client.deduct({ couponId, requestId, userId: requestId, quantity: 1n })));
  return { ids, answers };
}

describe('group commit with the WAIT in the same write', () => {
  it('when every master forgets its scripts in the middle of a sale, then the calls are sent again and exactly the stock is sold, once per request id', async () => {
    const couponId = uniqueId();
    await a.client.createCoupon({ couponId, totalStock: 300n, shardCount: 16 });
    const first = await sale(couponId, 150, 'a');
    expect(first.answers.every((r) => r.outcome === DeductOutcome.DEDUCTED)).toBe(true);

    for (const node of a.app.redis.nodes('master')) await node.script('FLUSH');
    // New requests and retries of answered ones, together, right after the flush.
    const [second, retried] = await Promise.all([
      sale(couponId, 250, 'b'),
      Promise.all(first.ids.slice(0, 60).map((requestId) => a.client.deduct({ couponId, requestId, userId: requestId, quantity: 1n }))),
    ]);
    expect(retried.every((r) => r.outcome === DeductOutcome.DEDUCTED && r.replayed)).toBe(true);
    expect(second.answers.filter((r) => r.outcome === DeductOutcome.DEDUCTED).length).toBe(150);
    expect(second.answers.filter((r) => r.outcome === DeductOutcome.SOLD_OUT).length).toBe(100);

    const s = await shardState(a.app, couponId);
    expect(s.levels.every((l) => (l.available ?? -1) >= 0)).toBe(true);
    expect(s.available + s.inTransit).toBe(0);
    expect(s.net).toBe(300);
    await settled(a.client, couponId);
    const ledger = await ledgerFigures(a.app, couponId);
    expect(ledger.deductRows).toBe(300);
    expect(ledger.duplicates).toBe(0);
    expect(ledger.remaining).toBe(0);
  });
});
