// Chooses one hash tag per shard so a coupon's shards spread evenly over the cluster's masters: naive tags
// {c1:s0}..{c1:s7} were measured landing 4/2/2 on 3 masters. Shard i goes to master (i + k) mod M (masters in a
// stable order, k from the coupon id), and its tag gets the first salt whose slot that master owns. Without k,
// the shards left over when M does not divide the shard count always went to the first masters: with 4
// shards on 3 masters, the first held half of every coupon's shards and took half of all the traffic.
// Listing the masters means reading all 16384 slots (~2 ms per coupon when done per call), so the placement
// keeps the list per topology: rebuilt when the client refreshes its slot map, when it is older than a second,
// or when a salt search cannot find its master (one left the cluster). The owner of each chosen slot is
// always read live, so a stale list can only skew the spread, never put a tag on another master than planned.
import slotOf from 'cluster-key-slot';
import type { ShardPlacement } from '../domain/ports.js';
import { shardTag } from './keys.js';

/** slot -> owning master ("host:port"), as ioredis keeps it in `cluster.slots`. */
export type SlotOwners = ReadonlyArray<ReadonlyArray<string> | undefined>;

/** Each master owns about 1/M of the slots, so a search takes ~M tries; missing after this many
 * ((11/12)^1000 ≈ 1e-38 even with 12 masters) means the master no longer owns slots. */
const MAX_SALTS = 1000;

/** The masters owning slots, in a stable (sorted) order. Ranges share one owner array in ioredis, so
 * comparing with the previous slot's array skips almost every slot without reading it. */
export function mastersOf(owners: SlotOwners): string[] {
  const seen = new Set<string>();
  let prev: ReadonlyArray<string> | undefined;
  for (let s = 0; s < owners.length; s++) {
    const o = owners[s];
    if (o === prev) continue;
    prev = o;
    const m = o?.[0];
    if (m) seen.add(m);
  }
  return [...seen].sort();
}

/** undefined: some master in `masters` owns no slot now (the list is stale). */
function searchTags(couponId: string, shardCount: number, owners: SlotOwners, masters: readonly string[]): string[] | undefined {
  const tags: string[] = new Array(shardCount);
  const first = slotOf(couponId) % masters.length;
  for (let i = 0; i < shardCount; i++) {
    const want = masters[(first + i) % masters.length];
    let salt = 0;
    let tag = shardTag(couponId, i, 0);
    while (owners[slotOf(tag)]?.[0] !== want) {
      if (++salt >= MAX_SALTS) return undefined;
      tag = shardTag(couponId, i, salt);
    }
    tags[i] = tag;
  }
  return tags;
}

export function chooseShardTags(couponId: string, shardCount: number, owners: SlotOwners, masters = mastersOf(owners)): string[] {
  if (masters.length === 0) throw new Error('the cluster slot map is empty');
  const tags = searchTags(couponId, shardCount, owners, masters);
  if (tags) return tags;
  const fresh = mastersOf(owners);
  if (fresh.length === 0) throw new Error('the cluster slot map is empty');
  // Only a slot map changing under the search itself gets here twice; any tag still routes correctly.
  return searchTags(couponId, shardCount, owners, fresh) ?? Array.from({ length: shardCount }, (_, i) => shardTag(couponId, i, 0));
}

/** ShardPlacement over the cluster's slot map as the client knows it now (ioredis: `() => cluster.slots`). */
export class SlotMapPlacement implements ShardPlacement {
  private masters: string[] | undefined;
  private listedAt = 0;

  constructor(
    private readonly owners: () => SlotOwners,
    private readonly maxAgeMs = 1000,
    private readonly now: () => number = performance.now.bind(performance),
  ) {}

  /** Forget the master list (wire to the client's slot-map refresh). */
  invalidate(): void {
    this.masters = undefined;
  }

  shardTags(couponId: string, shardCount: number): string[] {
    const owners = this.owners();
    const t = this.now();
    if (!this.masters || t - this.listedAt > this.maxAgeMs) {
      this.masters = mastersOf(owners);
      this.listedAt = t;
    }
    if (this.masters.length === 0) {
      this.masters = undefined;
      throw new Error('the cluster slot map is empty');
    }
    const tags = searchTags(couponId, shardCount, owners, this.masters);
    if (tags) return tags;
    this.masters = undefined;
    return chooseShardTags(couponId, shardCount, owners);
  }
}
