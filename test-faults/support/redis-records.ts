// What Redis holds about a coupon's requests, read straight from the shards: which request ids have a
// deduction record, and how many D (deduct) events each has in the outbox streams.
import type { App } from '../../src/app/app.js';
import { allShards, homeShard, shardRef } from '../../src/domain/routing.js';
import { fromOutboxEntry } from '../../src/settlement/event.js';
import { recordedQuantity } from '../../test/support/bucket-fields.js';

export async function recordsAndOutbox(app: App, couponId: string, requestIds: Iterable<string>) {
  const coupon = (await app.repo.find(couponId))!;
  const recorded = new Set<string>();
  await Promise.all(
    [...requestIds].map(async (id) => {
      const ref = shardRef(coupon, homeShard(coupon, id, ''));
      if ((await recordedQuantity(app.redis, app.store.keys(ref), app.config.idempotencyWindowS, id)) !== null) recorded.add(id);
    }),
  );
  const outboxDeducts = new Map<string, number>();
  for (const s of allShards(coupon)) {
    for (const [, fields] of await app.redis.xrange(app.store.keys(s).outbox, '-', '+')) {
      // An entry holds every event of one Lua call (group commit).
      for (const { event: e } of fromOutboxEntry(fields)) {
        if (e?.kind === 'D') outboxDeducts.set(e.requestId, (outboxDeducts.get(e.requestId) ?? 0) + 1);
      }
    }
  }
  return { recorded, outboxDeducts };
}
