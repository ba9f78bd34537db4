// Coupon administration: create (with preheating), read the level, restock (and finish restocks a crash
// interrupted).
import { DomainError, invalid, notFound } from './errors.js';
import type { Coupon, CreateCouponInput, RestockInput, SaleSettings, SaleView, StockLevel } from './model.js';
import type { CouponRepository, ShardPlacement, StockChanges, StockSignals, StockStore } from './ports.js';
import { allShards, splitEvenly } from './routing.js';
import type { CouponCatalog } from './coupon-catalog.js';
import type { SoldOutCache } from './sold-out-cache.js';
import type { ShardReloader } from './shard-reloader.js';
import { restockCreditId } from './ids.js';
import * as v from './validate.js';
import { ALWAYS_OPEN, saleStatus, saleWindow } from './sale.js';

export function saleView(sale: SaleSettings | undefined, nowMs: number): SaleView {
  const s = sale ?? ALWAYS_OPEN;
  return { startsAt: s.startsAt, endsAt: s.endsAt, paused: s.paused, status: saleStatus(s, nowMs) };
}

export interface AdminDeps {
  repo: CouponRepository;
  store: StockStore;
  placement: ShardPlacement;
  catalog: CouponCatalog;
  soldOut: SoldOutCache;
  signals: StockSignals;
  reloader: ShardReloader;
  defaultShards: number;
  /** Told when a restock lands on the shards (WatchStock, low-stock events). */
  changes?: StockChanges | undefined;
  /** The clock sale statuses are shown by (ms since epoch); default Date.now. */
  now?: (() => number) | undefined;
}

/** How long a level may reuse the coupon's MySQL record (settled remaining, total): GetStock and WatchStock
 * read MySQL at most once per this interval per coupon on an instance. Restock through this instance
 * refreshes it at once; elsewhere it is at most this stale. */
export const LEVEL_RECORD_TTL_MS = 250;
const MAX_RECORDS = 10_000;

export class CouponAdmin {
  private readonly records = new Map<string, { at: number; row: Promise<Coupon | null> }>();

  constructor(private readonly d: AdminDeps) {}

  /** The coupon's record, read from MySQL at most once per LEVEL_RECORD_TTL_MS (concurrent callers share it). */
  private record(couponId: string): Promise<Coupon | null> {
    const now = performance.now();
    const hit = this.records.get(couponId);
    if (hit && now - hit.at < LEVEL_RECORD_TTL_MS) return hit.row;
    if (this.records.size >= MAX_RECORDS) {
      for (const [id, r] of this.records) if (now - r.at >= LEVEL_RECORD_TTL_MS) this.records.delete(id);
      if (this.records.size >= MAX_RECORDS) this.records.clear();
    }
    const row = this.d.repo.find(couponId);
    this.records.set(couponId, { at: now, row });
    row.catch(() => this.records.delete(couponId));
    return row;
  }

  async create(input: CreateCouponInput): Promise<{ coupon: Coupon; created: boolean }> {
    const id = v.couponId(input.couponId);
    const total = v.units('total_stock', input.totalStock, 0n, v.MAX_TOTAL_STOCK);
    const shardCount = input.shardCount === 0 ? this.d.defaultShards : input.shardCount;
    if (shardCount < 1 || shardCount > v.MAX_SHARDS)
      throw invalid('shard_count', `must be in 1..${v.MAX_SHARDS} (0 = server default), got ${input.shardCount}`);
    if (input.perUserLimit < 0) throw invalid('per_user_limit', `must be >= 0 (0 = unlimited), got ${input.perUserLimit}`);
    const window = saleWindow(input.startsAt, input.endsAt);

    const shardTags = this.d.placement.shardTags(id, shardCount);
    const { coupon, created } = await this.d.repo.create({
      id,
      initialStock: total,
      shardCount,
      perUserLimit: input.perUserLimit,
      shardTags,
      ...window,
    });
    if (!created && (coupon.initialStock !== total || coupon.shardCount !== shardCount || coupon.perUserLimit !== input.perUserLimit)) {
      throw new DomainError(
        'already_exists',
        `coupon ${id} already exists with total_stock=${coupon.initialStock}, shard_count=${coupon.shardCount}, per_user_limit=${coupon.perUserLimit}`,
      );
    }
    if (!coupon.preheated) {
      if (created) {
        // Nothing has sold from a coupon this call inserted: each shard gets its share of the initial stock.
        // shard-init-2.lua never overwrites a shard, so one a Deduct's recovery made meanwhile is kept.
        const split = splitEvenly(coupon.initialStock, coupon.shardCount);
        await Promise.all(allShards(coupon).map((s) => this.d.store.initShard(s, split[s.index]!)));
      } else {
        await this.finishPreheat(coupon);
      }
      await this.d.repo.markPreheated(coupon.id);
      coupon.preheated = true;
    }
    this.d.catalog.remember(coupon);
    return { coupon, created };
  }

  async level(couponIdRaw: string, includeShards: boolean): Promise<StockLevel> {
    const couponId = v.couponId(couponIdRaw);
    // Unknown ids are answered from the catalog's bounded memory, not one query each.
    const known = await this.d.catalog.get(couponId);
    const coupon = await this.record(couponId);
    if (!coupon) throw notFound(`coupon ${couponId} does not exist`);
    // The record may be reused for a moment; the catalog applies sale announcements at once: the newer wins.
    const sale = (known.sale?.revision ?? -1) > (coupon.sale?.revision ?? -1) ? known.sale : coupon.sale;
    return this.levelOf(sale ? { ...coupon, sale } : coupon, includeShards);
  }

  async levelOf(coupon: Coupon, includeShards: boolean): Promise<StockLevel> {
    const shards = await this.d.store.probe(allShards(coupon));
    // Units moving between shards are counted twice (target credited, source not yet acknowledged) or not
    // at all, depending on when each shard is read, so a sum of shard reads is never exact during a sale.
    // The net counters change only with real deductions and compensations: total − Σnet is exact.
    let deducted = 0;
    let held = 0;
    for (const s of shards) {
      deducted += s.net;
      held += s.held ?? 0;
    }
    // Held units are exact too (only hold scripts move them, each on its own shard).
    const available = Math.max(0, coupon.totalStock - deducted - held);
    const settledNet = coupon.totalStock - coupon.settledRemaining;
    return {
      couponId: coupon.id,
      totalStock: coupon.totalStock,
      available,
      deducted,
      settledRemaining: coupon.settledRemaining,
      pendingSettlement: Math.max(0, deducted - settledNet),
      soldOut: available === 0,
      held,
      // A move's transit counter drops only when the source is acknowledged, after the target already
      // received (and maybe sold) the units: units in transit are part of `available`, never more than it.
      shards: includeShards
        ? shards.map((s) => ({
            index: s.index,
            available: s.available ?? 0,
            inTransit: Math.min(s.inTransit, available),
            held: s.held ?? 0,
          }))
        : [],
      observedAt: new Date(),
      sale: saleView(coupon.sale, this.now()),
    };
  }

  now(): number {
    return this.d.now ? this.d.now() : Date.now();
  }

  async restock(input: RestockInput): Promise<{ level: StockLevel; replayed: boolean }> {
    const couponId = v.couponId(input.couponId);
    const quantity = v.units('quantity', input.quantity, 1n, v.MAX_TOTAL_STOCK);
    const requestId = v.requestId(input.requestId);
    const r = await this.d.repo.restock(couponId, requestId, quantity, Number(v.MAX_TOTAL_STOCK));
    this.records.delete(couponId);
    if (!r) throw notFound(`coupon ${couponId} does not exist`);
    if ('overCap' in r)
      throw new DomainError(
        'failed_precondition',
        `quantity: the restock would bring total_stock to ${r.wouldBe}, above the most a coupon can hold (${v.MAX_TOTAL_STOCK}); nothing was added`,
      );
    if (r.needsRedis) await this.applyRestock(r.coupon, requestId, r.quantity);
    const coupon = (await this.d.repo.find(couponId))!;
    return { level: await this.levelOf(coupon, true), replayed: r.replayed };
  }

  /** A replayed CreateCoupon whose first call failed part-way through preheating. The shards it did make
   * may have sold since, and any shard may have lost its data after selling: giving a missing shard its
   * initial share would put sold units on sale again. Missing shards are rebuilt by the coupon's recovery
   * instead, from MySQL's remaining minus what is in flight, with their request records. */
  private async finishPreheat(coupon: Coupon): Promise<void> {
    const shards = allShards(coupon);
    for (let attempt = 0; attempt < 20; attempt++) {
      const missing = (await this.d.store.probe(shards)).find((l) => l.available === null);
      if (!missing) return;
      await this.d.reloader.reload(coupon, missing.index);
    }
    throw new DomainError('unavailable', `coupon ${coupon.id} is being recovered; retry CreateCoupon`, { retryAfterMs: 500 });
  }

  /** Finishes restocks committed in MySQL whose shards a crash left without their shares (run periodically):
   * older than `olderThanMs`, so a restock still being applied by its own call is left to it. */
  async finishRestocks(olderThanMs: number): Promise<void> {
    for (const r of await this.d.repo.unappliedRestocks(olderThanMs)) {
      const coupon = await this.d.repo.find(r.couponId);
      if (coupon) await this.applyRestock(coupon, r.requestId, r.quantity);
    }
  }

  /** Credits each shard its share, once per shard (restockCreditId); also finishes restocks a crash interrupted. */
  async applyRestock(coupon: Coupon, requestId: string, quantity: number): Promise<void> {
    const split = splitEvenly(quantity, coupon.shardCount);
    await Promise.all(
      allShards(coupon).map(async (s) => {
        if (split[s.index] === 0) return;
        for (let attempt = 0; ; attempt++) {
          const r = await this.d.store.credit(s, restockCreditId(requestId), split[s.index]!);
          if (r === 'applied' || r === 'already') return;
          // Missing: the recovery rebuilds it (recording this share as applied if its remaining has it).
          // Paused: a recovery holds the coupon. Either way the credit is tried again: it counts at most once.
          if (attempt >= 20)
            throw new DomainError('unavailable', `coupon ${coupon.id} is being recovered; retry the restock with the same request_id`, {
              retryAfterMs: 500,
            });
          if (r === 'missing') await this.d.reloader.reload(coupon, s.index);
          else await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }),
    );
    await this.d.repo.markRestockApplied(coupon.id, requestId);
    this.d.soldOut.clear(coupon.id);
    this.d.signals.stockReturned(coupon.id);
    this.d.changes?.changed(coupon.id, true);
  }
}
