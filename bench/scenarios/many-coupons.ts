// Many coupons: --coupons coupons of --coupon-stock units, requests spread round-robin over them for
// --duration seconds. No hot key: this is the spread-out day-to-day load.
import { CALL_TIMEOUT_MS, type BenchContext } from '../context.js';
import type { DesignRun } from '../designs.js';
import { measuredLoad, record } from '../measure.js';
import { padIndex } from '../request-template.js';
import type { ServerHandle } from '../servers.js';
import { diffStats } from './flash-sale.js';
import { measureTagChoice, tagChoiceNote } from '../tag-choice.js';

/** Small coupons need few shards: one per ~25 units, at most --shards. */
export function manyCouponShards(couponStock: number, maxShards: number): number {
  return Math.min(maxShards, Math.max(1, Math.floor(couponStock / 25)));
}

export async function manyCoupons(ctx: BenchContext, server: ServerHandle, d: DesignRun): Promise<void> {
  const { opts } = ctx;
  const count = opts.coupons;
  const width = String(count - 1).length;
  const prefix = `${ctx.runId}-mc-${d.label}-`;
  const ids = Array.from({ length: count }, (_, i) => prefix + padIndex(i, width));
  const shards = manyCouponShards(opts.couponStock, opts.shards);
  const setupStarted = Date.now();
  ctx.progress.draw(`many-coupons ${d.label}: creating ${count} coupons`, 0, 1, '');
  await server.create(ids.map((id) => ({ id, stock: opts.couponStock, shards })));
  const setupS = (Date.now() - setupStarted) / 1000;
  const stats0 = await server.stats();
  const concurrency = opts.stormConcurrency;
  const m = await measuredLoad(
    ctx,
    server,
    {
      addr: server.addr,
      client: opts.client,
      connections: opts.connections,
      concurrency,
      couponPrefix: prefix,
      couponCount: count,
      couponWidth: width,
      idPrefix: `${prefix}x`,
      quantity: 1,
      stopOnSoldOut: false,
      durationMs: opts.durationS * 1000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      perCoupon: true,
      epochMs: Date.now(),
    },
    `many-coupons ${d.label} c=${concurrency}`,
    { units: count * opts.couponStock, seconds: opts.durationS },
  );
  const levels = await server.levels(ids);
  const byId = new Map(levels.map((l) => [l.id, l]));
  let oversold = 0;
  let storeSold = 0;
  ids.forEach((id, i) => {
    const l = byId.get(id);
    const sold = l?.sold ?? 0;
    storeSold += sold;
    oversold += Math.max(0, (m.summary.perCoupon?.[i] ?? 0) - opts.couponStock, sold - opts.couponStock);
  });
  const notes = [`${count.toLocaleString('en')} coupons x ${opts.couponStock} units, ${shards} shard(s) each`];
  if (setupS >= 1) notes.push(`creating the coupons took ${setupS.toFixed(1)} s (not measured)`);
  // Measured after the load (the server is idle then), in this process over the same cluster's slot map.
  if (d.design === 'shardstock') notes.push(tagChoiceNote(await measureTagChoice(opts.shards)));
  const rec = record(
    'many-coupons',
    d.label,
    concurrency,
    count * opts.couponStock,
    m,
    {
      oversold,
      storeSold,
      clientSold: m.summary.deducted,
      soldOut: false,
    },
    notes,
  );
  rec.serverStats = diffStats(stats0, await server.stats());
  ctx.runs.push(rec);
  ctx.onRun(rec);
}
