// The relay reads a shard this instance just wrote within a few milliseconds of the write instead of at its
// next poll (src/settlement/relay/outbox-writes.ts): a fixed poll wait no longer adds to every event's
// settlement lag during a sale. Fakes for the outbox and JetStream: only the relay's timing is under test.
import { afterEach, describe, expect, it } from 'vitest';
import type { Coupon, ShardRef } from '../src/domain/ports.js';
import { OutboxWrites } from '../src/settlement/relay/outbox-writes.js';
import type { OutboxEntry, OutboxStreams } from '../src/settlement/relay/outbox.js';
import { Relay } from '../src/settlement/relay/relay.js';
import { newSettlementStats } from '../src/settlement/stats.js';

const coupon = { id: 'c1', shardCount: 2, shardTags: ['c1#0', 'c1#1'] } as unknown as Coupon;

/** An outbox whose shard 1 gets one entry per write(); reads are logged with their time. */
function fakeOutbox() {
  const pending: OutboxEntry[] = [];
  const reads: { shard: number; at: number }[] = [];
  let n = 0;
  const outbox = {
    async read(shard: ShardRef, _count: number, own = false) {
      if (own) return [];
      reads.push({ shard: shard.index, at: Date.now() });
      return shard.index === 1 ? pending.splice(0) : [];
    },
    async remove() {},
    async backlog() {
      return { length: 0, oldestMs: 0 };
    },
    // The idle probe (one call per master) sees what a read would find.
    async backlogs(shards: ShardRef[]) {
      return shards.map((s) => ({ length: s.index === 1 ? pending.length : 0, oldestMs: 0 }));
    },
    async claim() {
      return [];
    },
  } as unknown as OutboxStreams;
  const write = () => pending.push({ streamId: `${Date.now()}-${n++}`, events: [{ raw: [], event: null }] });
  return { outbox, reads, write };
}

let relay: Relay | undefined;
afterEach(async () => {
  await relay?.stop();
  relay = undefined;
});

describe('relay nudges', () => {
  it('when a write is made on this instance, then its shard is read within tens of ms although the poll interval is 2 s; without a nudge it waits for the poll', async () => {
    const { outbox, reads, write } = fakeOutbox();
    const published: number[] = [];
    const writes = new OutboxWrites();
    relay = new Relay(
      outbox,
      {
        publish: async () => {
          published.push(Date.now());
          return 'stored';
        },
      },
      { active: () => [coupon], discover: async () => [] },
      newSettlementStats().relay,
      { batch: 100, pollMs: 2000, idlePollMaxMs: 2000, claimIdleMs: 60_000, sweepIntervalMs: 60_000, nudges: writes, nudgeGapMs: 10 },
    ).start();
    await new Promise((r) => setTimeout(r, 300));
    const before = reads.length;
    // Written elsewhere (no nudge): not read until the next poll, 2 s away.
    write();
    await new Promise((r) => setTimeout(r, 300));
    expect(published).toHaveLength(0);
    expect(reads.length).toBe(before);
    // Written here: read at once, with what was there before.
    const at = Date.now();
    write();
    writes.wrote({ couponId: 'c1', index: 1, tag: 'c1#1' });
    await expect.poll(() => published.length, { timeout: 1000, interval: 5 }).toBe(2);
    expect(published[1]! - at).toBeLessThan(250);
    // Only the nudged shard was read early.
    expect(reads.slice(before).every((r) => r.shard === 1)).toBe(true);
  });
});
