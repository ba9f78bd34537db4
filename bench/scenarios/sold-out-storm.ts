// Sold-out storm: the coupon is exhausted first (not measured), then --duration seconds of traffic that must
// all be refused — the minutes after a flash sale, when most callers arrive too late.
import { CALL_TIMEOUT_MS, type BenchContext } from '../context.js';
import type { DesignRun } from '../designs.js';
import { measuredLoad, record } from '../measure.js';
import type { ServerHandle } from '../servers.js';
import { diffStats } from './flash-sale.js';

/** Units sold before the storm: at most 1,000, and a fifth of the design's flash-sale stock. */
const STORM_STOCK = 1_000;

export async function soldOutStorm(ctx: BenchContext, server: ServerHandle, d: DesignRun): Promise<void> {
  const { opts } = ctx;
  const id = `${ctx.runId}-so-${d.label}`;
  const stock = Math.min(STORM_STOCK, Math.ceil((d.slow ? opts.slowStock : opts.stock) / 5));
  await server.create([{ id, stock, shards: opts.shards }]);
  const base = {
    addr: server.addr,
    client: opts.client,
    connections: opts.connections,
    couponPrefix: id,
    couponCount: 1,
    couponWidth: 0,
    quantity: 1,
    callTimeoutMs: CALL_TIMEOUT_MS,
    perCoupon: false,
  };
  ctx.progress.draw(`sold-out-storm ${d.label}: selling out`, 0, 1, '');
  const exhaust = await ctx.load.run({
    ...base,
    concurrency: 64,
    idPrefix: `${id}-e`,
    stopOnSoldOut: true,
    durationMs: (d.slow ? opts.slowMaxRunS : opts.maxRunS) * 1000,
    epochMs: Date.now(),
  });
  const stats0 = await server.stats();
  const concurrency = opts.stormConcurrency;
  const m = await measuredLoad(
    ctx,
    server,
    {
      ...base,
      concurrency,
      idPrefix: `${id}-s`,
      stopOnSoldOut: false,
      durationMs: opts.durationS * 1000,
      epochMs: Date.now(),
    },
    `sold-out-storm ${d.label} c=${concurrency}`,
    { units: 0, seconds: opts.durationS },
  );
  const [level] = await server.levels([id]);
  const storeSold = level?.sold ?? 0;
  const clientSold = exhaust.deducted + m.summary.deducted;
  const notes: string[] = [];
  if ((exhaust.outcomes.SOLD_OUT ?? 0) === 0)
    notes.push(`the coupon was not sold out before the storm (${exhaust.deducted} of ${stock} sold)`);
  if (m.summary.deducted > 0) notes.push(`${m.summary.deducted} deductions succeeded during the storm`);
  const rec = record(
    'sold-out-storm',
    d.label,
    concurrency,
    stock,
    m,
    {
      oversold: Math.max(0, clientSold - stock, storeSold - stock),
      storeSold,
      clientSold,
      soldOut: true,
    },
    notes,
  );
  rec.serverStats = diffStats(stats0, await server.stats());
  // Each refusal reads its request's record; how many share a call is what the record-read batcher is for.
  const reads = rec.serverStats?.recordReads ?? 0;
  const calls = rec.serverStats?.recordReadCalls ?? 0;
  if (calls > 0) rec.notes.push(`record reads per call: ${(reads / calls).toFixed(1)} (${reads} reads in ${calls} calls)`);
  ctx.runs.push(rec);
  ctx.onRun(rec);
}
