// The seam between orders and holds: OrderHolds (what the order coordinator needs, ports.ts) over the Holds
// use case (holds.ts) and Compensate. An item's hold id is derived from its coupon, request id and user, so
// an order can release or confirm a hold it never got an answer for (its caller died mid-call).
import type { CompensateService } from './compensate.js';
import type { CouponCatalog } from './coupon-catalog.js';
import { type Holds, holdIdOf } from './holds.js';
import type { HoldEnd, HoldKey, HoldTake, OrderHolds } from './ports.js';
import { homeShard } from './routing.js';

export function orderHoldsOver(
  holds: Holds,
  compensate: Pick<CompensateService, 'compensate'>,
  catalog: Pick<CouponCatalog, 'get'>,
): OrderHolds {
  /** The hold id Reserve gives the item: its shard is the request's home shard, as for a Deduct. */
  const holdId = async (key: HoldKey) =>
    holdIdOf(key.couponId, homeShard(await catalog.get(key.couponId), key.requestId, key.userId), key.requestId);
  return {
    async reserve(item, signal): Promise<HoldTake> {
      const r = await holds.reserve(
        { couponId: item.couponId, requestId: item.requestId, userId: item.userId, quantity: BigInt(item.quantity), ttlMs: item.ttlMs },
        signal,
      );
      if (r.outcome !== 'held') return { kind: 'refused', reason: r.outcome };
      if (!r.hold) throw new Error(`Reserve of ${item.couponId} ${item.requestId} answered HELD without its hold`);
      if (r.hold.state === 'held') return { kind: 'held', hold: r.hold };
      return { kind: 'gone', end: r.hold.state, hold: r.hold };
    },
    async confirm(key) {
      const r = await holds.confirm(await holdId(key));
      return { end: r.outcome === 'not_found' ? 'not_held' : r.outcome, hold: r.hold };
    },
    async release(key, reason) {
      const r = await holds.release(await holdId(key), reason);
      const end: HoldEnd = r.outcome === 'already_released' ? 'released' : r.outcome === 'not_found' ? 'not_held' : r.outcome;
      return { end, hold: r.hold };
    },
    async extend(key, ttlMs) {
      const r = await holds.extend(await holdId(key), ttlMs);
      return { end: r.outcome === 'extended' ? 'extended' : r.outcome === 'not_found' ? 'not_held' : r.outcome, hold: r.hold };
    },
    async get(key) {
      return holds.get(await holdId(key));
    },
    async compensate(key, reason) {
      return (await compensate.compensate({ couponId: key.couponId, requestId: key.requestId, reason })).outcome;
    },
  };
}
