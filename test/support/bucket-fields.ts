// Reads request records and claims straight from a shard's bucketed hashes (src/redis/keys.ts records/claims,
// lua/includes/buckets.lua), for tests that look at Redis itself (on a replica, after a loss).
import { firstBucket, recordField, type ShardKeys } from '../../src/redis/keys.js';

interface HashReader {
  hget(key: string, field: string | Buffer): Promise<string | null>;
  hdel(key: string, ...fields: (string | Buffer)[]): Promise<number>;
}

/** The three bucket hashes a call made now would pass. */
export function bucketKeys(keys: ShardKeys, of: 'records' | 'claims', windowS: number): string[] {
  const first = firstBucket(Date.now(), windowS);
  return [keys[of](first), keys[of](first + 1), keys[of](first + 2)];
}

/** The packed value of a request's record or claim field, null when there is none. */
export async function bucketField(
  redis: Pick<HashReader, 'hget'>,
  keys: ShardKeys,
  of: 'records' | 'claims',
  windowS: number,
  requestId: string,
): Promise<string | null> {
  for (const key of bucketKeys(keys, of, windowS)) {
    const v = await redis.hget(key, recordField(requestId));
    if (v !== null) return v;
  }
  return null;
}

/** The quantity of a request's record ("q|r|t|flags|u"), null when there is none. */
export async function recordedQuantity(redis: Pick<HashReader, 'hget'>, keys: ShardKeys, windowS: number, requestId: string) {
  const v = await bucketField(redis, keys, 'records', windowS, requestId);
  return v === null ? null : v.split('|')[0]!;
}

/** Deletes a request's claim wherever it is (a claim lost or lapsed). */
export async function dropClaim(redis: HashReader, keys: ShardKeys, windowS: number, requestId: string): Promise<void> {
  for (const key of bucketKeys(keys, 'claims', windowS)) await redis.hdel(key, recordField(requestId));
}
