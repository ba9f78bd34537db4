// Puts back a shard whose key vanished (eviction, lost data). A coupon that never finished preheating gets
// its initial split; otherwise the shard gets what MySQL says the coupon has left, minus what is still on its
// way to MySQL and minus what the other shards hold. shard-init-2.lua creates the shard only if it is still
// absent, so instances racing to reload it load it once.
import { unavailable } from './errors.js';
import type { Coupon, CouponRepository, InFlightCounter, StockStore } from './ports.js';
import { allShards, shardRef, splitEvenly } from './routing.js';

export class ShardReloader {
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly store: StockStore,
    private readonly repo: CouponRepository,
    private readonly inFlight: InFlightCounter,
    private readonly onReload: (couponId: string, shard: number, units: number) => void = () => {},
  ) {}

  reload(coupon: Coupon, index: number): Promise<void> {
    const key = `${coupon.id}#${index}`;
    let p = this.running.get(key);
    if (!p) {
      p = this.load(coupon, index).finally(() => this.running.delete(key));
      this.running.set(key, p);
    }
    return p;
  }

  private async load(cached: Coupon, index: number): Promise<void> {
    const coupon = await this.repo.find(cached.id);
    if (!coupon) throw unavailable(`coupon ${cached.id} vanished from the database`);
    if (!coupon.preheated) {
      await this.store.initShard(shardRef(coupon, index), splitEvenly(coupon.initialStock, coupon.shardCount)[index]!);
      return;
    }
    const [levels, inFlight] = await Promise.all([this.store.probe(allShards(coupon)), this.inFlight.inFlightNet(coupon.id)]);
    const others = levels.filter((l) => l.index !== index);
    const othersHold = others.reduce((sum, l) => sum + (l.available ?? 0) + l.inTransit, 0);
    const units = Math.max(0, coupon.settledRemaining - inFlight - othersHold);
    // Its net counter too: every net deduction is settled or in flight, and the other shards count theirs.
    const netAll = coupon.totalStock - coupon.settledRemaining + inFlight;
    const net = Math.max(0, netAll - others.reduce((sum, l) => sum + l.net, 0));
    if (await this.store.initShard(shardRef(coupon, index), units, net)) this.onReload(coupon.id, index, units);
  }
}
