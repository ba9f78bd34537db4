// A shard lost as with a flushed master and its replicas: its hash, its holds set and every record hash a live
// record could be in, for the recovery (a Reconcile with repair) to rebuild from MySQL.
import type { App } from '../../src/app/app.js';
import type { Coupon } from '../../src/domain/model.js';
import { shardRef } from '../../src/domain/routing.js';
import { firstBucket } from '../../src/redis/keys.js';

export async function loseShard(app: App, coupon: Coupon, index: number): Promise<void> {
  const keys = app.store.keys(shardRef(coupon, index));
  await app.redis.del(keys.shard, keys.holds);
  const first = firstBucket(Date.now(), app.config.idempotencyWindowS);
  for (const n of [-3, -2, -1, 0, 1, 2, 3]) await app.redis.del(keys.records(first + n));
}
