// Every Redis key name the service uses is built here and nowhere else; Lua scripts receive them as KEYS.
//
// A coupon's stock is split over shards. Each shard owns one hash tag, chosen when the coupon is created
// (see shard-tags.ts) so shards spread evenly over the cluster's masters, and every key of one shard
// shares that tag: one Lua call can touch all of them atomically in one slot.

export interface ShardKeys {
  /** hash: avail (units to hand out), transit (units moved out, not yet acknowledged by the target),
   *  net (units deducted minus units compensated here), mo (moves started out of here: a counter Reconcile
   *  reads twice, lua/move-out-2.lua) */
  shard: string;
  /** hash per time bucket (one idempotency window wide, see bucketOf): field recordField(request_id) -> the
   *  Deduct's packed record "q|r|t|flags|u" (lua/includes/buckets.lua); expires after the next bucket ends */
  records(bucket: number): string;
  /** hash per time bucket like records: field recordField(request_id) -> "user|quantity[|holdUntilMs]",
   *  claimed by the first Deduct of a limited coupon (lua/claim-4.lua) */
  claims(bucket: number): string;
  /** hash user_id -> units this user holds of the coupon (limited coupons only) */
  users: string;
  /** Legacy layout (before the bucketed hashes), read only by the upgrade fold (legacy-fold.ts): a hash per
   *  request record, a string per claim, an integer per user. */
  legacy: { request(requestId: string): string; claim(requestId: string): string; user(userId: string): string };
  /** stream: events not yet relayed to JetStream */
  outbox: string;
  /** hash moveId -> "target|quantity|startedMs": fallback moves that left this shard and have not been acknowledged */
  moves: string;
  /** sorted set of credit ids (moves in, restocks) applied here, scored by time: makes credits idempotent */
  credits: string;
  /** string: touched (at `replica` ack level) by an answer that vouches for an earlier write without writing
   *  itself (a replay, ALREADY_COMPENSATED), so that the WAIT after it covers that write (stock-store.ts) */
  ack: string;
  /** sorted set "<requestId>|<userId>" -> expiresMs (Redis server clock): the shard's open holds (Reserve),
   *  what any instance's sweeper expires (lua/hold-*.lua) */
  holds: string;
}

export function shardKeys(namespace: string, tag: string): ShardKeys {
  const base = `${namespace}:{${tag}}`;
  return {
    shard: `${base}:shard`,
    records: (bucket) => `${base}:rq:${bucket}`,
    claims: (bucket) => `${base}:cl:${bucket}`,
    users: `${base}:users`,
    legacy: {
      request: (requestId) => `${base}:req:${requestId}`,
      claim: (requestId) => `${base}:claim:${requestId}`,
      user: (userId) => `${base}:user:${userId}`,
    },
    outbox: `${base}:outbox`,
    moves: `${base}:moves`,
    credits: `${base}:credits`,
    ack: `${base}:ack`,
    holds: `${base}:holds`,
  };
}

/** The first of the three buckets a record or claim call passes (lua/includes/buckets.lua): the bucket whose
 * start is nearest this instance's clock, minus 2. The script picks the bucket to write from the server's clock,
 * which then lies among the three whenever this clock is within half a window of it. */
export function firstBucket(nowMs: number, windowS: number): number {
  return Math.floor(nowMs / 1000 / windowS + 0.5) - 2;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PACKED_UUID = 0x7e; // '~': never in an id (validate.ts), so a packed field cannot equal a plain one

/** A request id as a field of the records and claims hashes: a lowercase canonical UUID packed to 17 bytes
 * ('~' and its 16 bytes: a field that fits a 24-byte allocation instead of 40), any other id as it is. */
export function recordField(requestId: string): string | Buffer {
  if (requestId.length !== 36 || !UUID.test(requestId)) return requestId;
  const b = Buffer.allocUnsafe(17);
  b[0] = PACKED_UUID;
  b.write(requestId.replaceAll('-', ''), 1, 'hex');
  return b;
}

/** The request id a field of the records or claims hashes stands for (the inverse of recordField). */
export function requestIdOfField(field: Buffer): string {
  if (field.length !== 17 || field[0] !== PACKED_UUID) return field.toString('utf8');
  const h = field.toString('hex', 1);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The text between the braces of one shard's keys. Coupon ids cannot contain `#` or `{}`, so tags never collide. */
export function shardTag(couponId: string, index: number, salt: number): string {
  return `${couponId}#${index}.${salt}`;
}

/** string per coupon, present while the coupon is below its low-stock threshold: SET NX makes the low-stock
 *  event fire once per crossing however many instances see it; deleted when stock comes back above. */
export function lowStockKey(namespace: string, couponId: string): string {
  return `${namespace}:lowstock:{${couponId}}`;
}

/** string per coupon, present while the coupon is sold out: SET NX fires the sold-out event once per crossing,
 *  the DEL that removes it fires back-in-stock once (src/watch/stock-events.ts). */
export function soldOutMarkKey(namespace: string, couponId: string): string {
  return `${namespace}:soldout:{${couponId}}`;
}

/** string: "2" once the legacy per-request keys of the namespace were folded into the bucketed hashes
 *  (legacy-fold.ts); no hash tag, it is one key for the whole namespace. */
export function layoutMarkerKey(namespace: string): string {
  return `${namespace}:layout`;
}

/** Consumer group every service instance joins on every outbox stream. */
export const RELAY_GROUP = 'relay';

/** hash per order (ReserveOrder / DeductOrder request_id), in a slot of its own: kind, user, items, TTL, state
 *  and the decision (docs/orders.md). Expires with the idempotency window. */
export function orderKey(namespace: string, orderId: string): string {
  return `${namespace}:order:{o:${orderId}}`;
}

/** How many due-lists the order sweeper reads: orders spread over this many slots (and so masters). */
export const ORDER_DUE_LISTS = 16;

/** sorted set of order ids scored by when the sweeper should look at the order next (src/domain/order-sweeper.ts). */
export function orderDueKey(namespace: string, list: number): string {
  return `${namespace}:orders:due:{od${list}}`;
}

/** How many set keys the index of shards with open holds is spread over (each in its own slot). */
export const HOLD_INDEX_PARTS = 8;

/** set per part: "<couponId>|<index>|<tag>" of every shard that may have open holds, so that sweepers visit
 *  only those (src/redis/hold-store.ts); part = a hash of the tag. */
export function holdIndexKey(namespace: string, part: number): string {
  return `${namespace}:holdidx:{${part}}`;
}
