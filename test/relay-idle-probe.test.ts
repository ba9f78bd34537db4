// An idle shard costs the relay a share of one outbox-probe-1.lua call per master, not a read of its own: an
// instance serving 10,000 coupons of 4 shards sent ~40,000 XREADGROUPs a second while nothing was sold, and
// 80,000 commands per backlog sweep (src/settlement/relay/outbox.ts backlogs). The probe must still find
// every event: written by another instance (no nudge on the relaying one), on every master, and on a shard
// whose master the client has wrong.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { allShards } from '../src/domain/routing.js';
import { slotOf } from '../src/redis/key-slot.js';
import { masterOf } from '../src/redis/master-pipeline.js';
import { Scripts } from '../src/redis/scripts.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { closeInstances } from './support/instance-pair.js';
import { ledgerFigures, sleep } from './support/settlement.js';

const MASTERS = [7001, 7002, 7003];
let quiet: TestApp;
let relaying: TestApp;
let selling: TestApp;
let nodes: Redis[];

/** Calls of `command` the three masters have served so far. */
async function served(command: string): Promise<number> {
  let n = 0;
  for (const node of nodes) {
    const m = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec((await node.info('commandstats')) as string);
    n += Number(m?.[1] ?? 0);
  }
  return n;
}

beforeAll(async () => {
  // No relay: what a Deduct writes stays in its outbox for the probe to count.
  quiet = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
  // The relay and settler run on one instance; the sales go through another, so no write nudges the relay.
  relaying = await startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' });
  selling = await startTestApp({ SHARDSTOCK_NAMESPACE: relaying.namespace, SHARDSTOCK_WORKERS: 'none' });
  nodes = MASTERS.map((port) => new Redis(port, '127.0.0.1'));
});
afterAll(async () => {
  for (const n of nodes ?? []) n.disconnect();
  await closeInstances(selling, relaying, quiet);
});

describe('outbox backlogs, one call per master', () => {
  it('when some shards on every master hold events and the others none, then backlogs() answers what each shard answers on its own, also for a shard the client routes to the wrong master', async () => {
    const id = uniqueId('probe');
    await quiet.client.createCoupon({ couponId: id, totalStock: 12n, shardCount: 12 });
    for (let i = 0; i < 5; i++)
      expect((await quiet.client.deduct({ couponId: id, requestId: `r-${i}` })).outcome).toBe(DeductOutcome.DEDUCTED);
    const coupon = (await quiet.app.settlement.ledger.find(id))!;
    const refs = allShards(coupon);
    const outbox = quiet.app.settlement.outbox;
    const redis = quiet.app.redis;
    expect(new Set(refs.map((r) => masterOf(redis, outbox.key(r)))).size).toBe(3);

    const oneByOne = await Promise.all(refs.map((r) => outbox.backlog(r)));
    expect(oneByOne.filter((b) => b.length > 0)).toHaveLength(5);
    expect(oneByOne.filter((b) => b.length === 0)).toHaveLength(7);
    expect(await outbox.backlogs(refs)).toEqual(oneByOne);

    // The client's slot map sends one busy shard to another master: that master answers "not mine" (not
    // "empty"), and backlogs() asks about the shard on its own.
    const busy = refs[oneByOne.findIndex((b) => b.length > 0)]!;
    const key = outbox.key(busy);
    const right = masterOf(redis, key)!;
    const wrongRef = refs.find((r) => masterOf(redis, outbox.key(r)) !== right)!;
    const scripts = new Scripts(redis, quiet.namespace, quiet.app.config.idempotencyWindowS);
    const mixed = await scripts.outboxProbe([outbox.key(wrongRef), key]);
    expect(mixed[0]).toBeDefined();
    expect(mixed[1]).toBeUndefined();
    const slots = redis.slots as string[][];
    const saved = slots[slotOf(key)]!;
    slots[slotOf(key)] = slots[slotOf(outbox.key(wrongRef))]!;
    try {
      expect(await outbox.backlogs(refs)).toEqual(oneByOne);
    } finally {
      slots[slotOf(key)] = saved;
    }
  });

  it('when 600 shards sit idle, then the relay reads none of them one by one; events another instance writes to them are still relayed and settled', async () => {
    const ids = Array.from({ length: 150 }, () => uniqueId('idle'));
    for (let i = 0; i < ids.length; i += 25)
      await Promise.all(ids.slice(i, i + 25).map((couponId) => relaying.client.createCoupon({ couponId, totalStock: 4n, shardCount: 4 })));
    // Every shard has had its first look and found nothing.
    await sleep(1500);
    const readsBefore = await served('xreadgroup');
    await sleep(2000);
    const idleReads = (await served('xreadgroup')) - readsBefore;
    // Read one by one, each idle shard is read at least once a second (idlePollMaxMs): 1,200 reads here.
    expect(idleReads).toBeLessThan(60);

    for (let i = 0; i < ids.length; i += 25)
      await Promise.all(
        ids.slice(i, i + 25).map(async (couponId) => {
          expect((await selling.client.deduct({ couponId, requestId: 'r-1' })).outcome).toBe(DeductOutcome.DEDUCTED);
        }),
      );
    await expect
      .poll(async () => (await Promise.all(ids.map((id) => ledgerFigures(relaying.app, id)))).filter((f) => f.deductRows === 1).length, {
        timeout: 30_000,
        interval: 500,
      })
      .toBe(ids.length);
    for (const id of ids.slice(0, 10)) expect((await ledgerFigures(relaying.app, id)).remaining).toBe(3);
  });
});
