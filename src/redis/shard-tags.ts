// Chooses one hash tag per shard so a coupon's shards spread evenly over the cluster's masters: naive tags
// {c1:s0}..{c1:s7} were measured landing 4/2/2 on 3 masters. Shard i goes to master i mod M (masters in a
// stable order), and its tag gets the first salt whose slot that master owns.
import slotOf from 'cluster-key-slot';
import type { ShardPlacement } from '../domain/ports.js';
import { shardTag } from './keys.js';

/** slot -> owning master ("host:port"), as ioredis keeps it in `cluster.slots`. */
export type SlotOwners = ReadonlyArray<ReadonlyArray<string> | undefined>;

export function chooseShardTags(couponId: string, shardCount: number, owners: SlotOwners): string[] {
  const masters = [...new Set(owners.map((o) => o?.[0]).filter((m): m is string => !!m))].sort();
  if (masters.length === 0) throw new Error('the cluster slot map is empty');
  const tags: string[] = [];
  for (let i = 0; i < shardCount; i++) {
    const want = masters[i % masters.length];
    let salt = 0;
    // Each master owns about 1/M of the slots, so this takes ~M tries; the bound only guards a broken map.
    while (owners[slotOf(shardTag(couponId, i, salt))]?.[0] !== want && salt < 10_000) salt++;
    tags.push(shardTag(couponId, i, salt));
  }
  return tags;
}

/** ShardPlacement over the cluster's slot map as the client knows it now (ioredis: `() => cluster.slots`). */
export class SlotMapPlacement implements ShardPlacement {
  constructor(private readonly owners: () => SlotOwners) {}

  shardTags(couponId: string, shardCount: number): string[] {
    return chooseShardTags(couponId, shardCount, this.owners());
  }
}
