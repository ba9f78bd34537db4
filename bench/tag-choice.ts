// CreateCoupon's shard-tag choice in isolation: µs per coupon to pick --shards tags over the live cluster's
// slot map, through the cached placement the service uses and through a cold choice that lists the masters
// again (what every coupon paid before the list was cached). The many-coupons scenario reports it in its
// notes; `npx tsx bench/tag-choice.ts [shards]` prints it alone.
import { Cluster } from 'ioredis';
import slotOf from 'cluster-key-slot';
import { chooseShardTags, mastersOf, SlotMapPlacement } from '../src/redis/shard-tags.js';
import { REDIS_PORTS } from '../deploy/local/stack.js';

export interface TagChoiceCost {
  shards: number;
  masters: number;
  /** Mean µs per coupon through SlotMapPlacement (masters listed once per topology). */
  cachedUs: number;
  /** Mean µs per coupon listing the masters each time. */
  coldUs: number;
  /** Largest minus smallest count of shards per master over the measured coupons (0 or 1 = even). */
  worstSpread: number;
}

function meanUs(n: number, fn: (i: number) => unknown): number {
  for (let i = 0; i < Math.min(200, n); i++) fn(-1 - i); // warm-up (JIT)
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn(i);
  return ((performance.now() - t0) * 1000) / n;
}

export async function measureTagChoice(shards: number, coupons = 5000): Promise<TagChoiceCost> {
  const cluster = new Cluster(
    REDIS_PORTS.slice(0, 3).map((port) => ({ host: '127.0.0.1', port })),
    { scaleReads: 'master' },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      cluster.once('ready', () => resolve());
      cluster.once('error', reject);
    });
    const owners = cluster.slots;
    const placement = new SlotMapPlacement(() => owners);
    let worstSpread = 0;
    const cachedUs = meanUs(coupons, (i) => {
      const tags = placement.shardTags(`tag-bench-${i}`, shards);
      if (i % 97 !== 0) return;
      const per = new Map<string, number>();
      for (const t of tags) per.set(owners[slotOf(t)]![0]!, (per.get(owners[slotOf(t)]![0]!) ?? 0) + 1);
      worstSpread = Math.max(worstSpread, Math.max(...per.values()) - Math.min(...per.values()));
    });
    const coldUs = meanUs(Math.ceil(coupons / 10), (i) => chooseShardTags(`tag-cold-${i}`, shards, owners));
    return { shards, masters: mastersOf(owners).length, cachedUs, coldUs, worstSpread };
  } finally {
    cluster.disconnect();
  }
}

export function tagChoiceNote(c: TagChoiceCost): string {
  return (
    `shard-tag choice (CreateCoupon): ${c.cachedUs.toFixed(1)} µs per coupon for ${c.shards} shards on ${c.masters} masters ` +
    `(${c.coldUs.toFixed(0)} µs listing the masters per coupon; spread within ${c.worstSpread} shard(s) per master)`
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const shards = Number(process.argv[2] ?? 16);
  console.log(tagChoiceNote(await measureTagChoice(shards)));
  process.exit(0);
}
