// What Redis holds about a coupon's requests, read straight from the shards: which request ids have a
// deduction record, and how many D (deduct) events each has in the outbox streams.
import type { App } from '../../src/app/app.js';
import { allShards, homeShard, shardRef } from '../../src/domain/routing.js';
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
      const f = new Map<string, string>();
      for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
      if (f.get('k') === 'D') outboxDeducts.set(f.get('r')!, (outboxDeducts.get(f.get('r')!) ?? 0) + 1);
    }
  }
  return { recorded, outboxDeducts };
}
