// Reads a coupon's shards straight from Redis, for exact counting in tests.
import type { App } from '../../src/app/app.js';
import type { Coupon } from '../../src/domain/model.js';
import { allShards, shardRef } from '../../src/domain/routing.js';
import { firstBucket } from '../../src/redis/keys.js';
import { fromOutboxEntry } from '../../src/settlement/event.js';

export async function shardState(app: App, couponId: string) {
  const coupon = (await app.repo.find(couponId))!;
  const shards = allShards(coupon);
  const levels = await app.store.probe(shards);
  // Events, not entries: one entry holds every event of one Lua call (group commit).
  const outbox = await Promise.all(
    shards.map(async (s) =>
      (await app.redis.xrange(app.store.keys(s).outbox, '-', '+')).reduce((n, [, f]) => n + fromOutboxEntry(f).length, 0),
    ),
  );
  const moves = await Promise.all(shards.map((s) => app.store.pendingMoves(s)));
  return {
    coupon,
    levels,
    available: levels.reduce((a, l) => a + (l.available ?? 0), 0),
    inTransit: levels.reduce((a, l) => a + l.inTransit, 0),
    net: levels.reduce((a, l) => a + l.net, 0),
    /** Units in open holds. */
    held: levels.reduce((a, l) => a + (l.held ?? 0), 0),
    outboxEvents: outbox.reduce((a, n) => a + n, 0),
    pendingMoves: moves.flat().length,
  };
}

/** One shard loses everything, as with a flushed master: its hash, holds, user counts, outbox, moves, credits,
 * ack mark, and the request records and claims of every live bucket. */
export async function loseShard(app: App, coupon: Coupon, index: number): Promise<void> {
  const k = app.store.keys(shardRef(coupon, index));
  const bucket = firstBucket(Date.now(), app.config.idempotencyWindowS);
  const gone = [k.shard, k.holds, k.users, k.outbox, k.moves, k.credits, k.ack];
  for (let n = -3; n <= 3; n++) gone.push(k.records(bucket + n), k.claims(bucket + n));
  for (const key of gone) await app.redis.del(key);
}
