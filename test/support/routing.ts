// Request ids chosen for where they land, so that a test can put a call on the shard its interleaving needs.
import type { Coupon } from '../../src/domain/model.js';
import { homeShard } from '../../src/domain/routing.js';

/** A request id (unlimited coupon) whose home is shard `shard`: the first of `<prefix>-0`, `<prefix>-1`, … */
export function requestIdHomedAt(coupon: Coupon, shard: number, prefix: string): string {
  for (let i = 0; ; i++) if (homeShard(coupon, `${prefix}-${i}`, '') === shard) return `${prefix}-${i}`;
}
