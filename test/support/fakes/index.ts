// The domain assembled over in-memory fakes of its ports: what src/app wires over Redis, MySQL and NATS,
// without the stack, so use cases can be tested in milliseconds and driven by property tests.
import { CouponAdmin } from '../../../src/domain/admin.js';
import { CompensateService } from '../../../src/domain/compensate.js';
import { CouponCatalog } from '../../../src/domain/coupon-catalog.js';
import { DeductService } from '../../../src/domain/deduct.js';
import { MoveSweeper } from '../../../src/domain/move-sweeper.js';
import type { Coupon } from '../../../src/domain/ports.js';
import { allShards } from '../../../src/domain/routing.js';
import { ShardReloader } from '../../../src/domain/shard-reloader.js';
import { SoldOutCache } from '../../../src/domain/sold-out-cache.js';
import { FakeCouponRecovery } from './coupon-recovery.js';
import { FakeCouponRepository } from './coupon-repository.js';
import { FakeStockSignals, FakePlacement } from './stock-signals.js';
import { FakeStockStore } from './stock-store.js';

export { FakeCouponRecovery, FakeCouponRepository, FakeStockSignals, FakeStockStore, FakePlacement };

export interface FakeDomainOptions {
  soldOutTtlMs?: number;
  maxQuantity?: number;
  defaultShards?: number;
}

export function fakeDomain(options: FakeDomainOptions = {}) {
  const repo = new FakeCouponRepository();
  const store = new FakeStockStore();
  const signals = new FakeStockSignals();
  const recovery = new FakeCouponRecovery(repo, store);
  const reloads: { couponId: string; shards: number[]; units: number }[] = [];
  const reloader = new ShardReloader(recovery, (couponId, shards, units) => reloads.push({ couponId, shards, units }));
  const catalog = new CouponCatalog(repo);
  const soldOut = new SoldOutCache(options.soldOutTtlMs ?? 60_000, signals);
  const errors: { what: string; err: unknown }[] = [];
  const onError = (what: string, err: unknown) => errors.push({ what, err });
  const changes: { couponId: string; returned: boolean }[] = [];
  const onChange = { changed: (couponId: string, returned: boolean) => changes.push({ couponId, returned }) };
  const deduct = new DeductService(catalog, store, soldOut, reloader, options.maxQuantity ?? 100, onError, onChange);
  const compensate = new CompensateService(catalog, store, soldOut, signals, reloader, onChange);
  const admin = new CouponAdmin({
    repo,
    store,
    placement: new FakePlacement(),
    catalog,
    soldOut,
    signals,
    reloader,
    defaultShards: options.defaultShards ?? 4,
    changes: onChange,
  });
  const sweeper = new MoveSweeper(store, reloader, 0);

  async function createCoupon(id: string, totalStock: number, shardCount: number, perUserLimit = 0): Promise<Coupon> {
    return (await admin.create({ couponId: id, totalStock: BigInt(totalStock), shardCount, perUserLimit })).coupon;
  }

  /** Σ(avail + transit + net) over the coupon's shards (missing shards count 0). */
  function units(coupon: Coupon): { avail: number; transit: number; net: number; sum: number } {
    let avail = 0;
    let transit = 0;
    let net = 0;
    for (const ref of allShards(coupon)) {
      const s = store.shard(ref);
      if (!s) continue;
      avail += s.avail;
      transit += s.transit;
      net += s.net;
    }
    return { avail, transit, net, sum: avail + transit + net };
  }

  return {
    repo,
    store,
    signals,
    recovery,
    reloader,
    reloads,
    catalog,
    soldOut,
    deduct,
    compensate,
    admin,
    sweeper,
    errors,
    changes,
    createCoupon,
    units,
  };
}

export type FakeDomain = ReturnType<typeof fakeDomain>;
