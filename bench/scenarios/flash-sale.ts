// Flash sale: one hot coupon, every request a distinct user asking for one unit, at one in-flight level of the
// sweep; the run goes until the coupon is sold out (or --max-run). run.ts interleaves designs per level.
import { CALL_TIMEOUT_MS, type BenchContext } from '../context.js';
import type { DesignRun } from '../designs.js';
import { measuredLoad, record } from '../measure.js';
import type { ServerHandle } from '../servers.js';

export async function flashSale(ctx: BenchContext, server: ServerHandle, d: DesignRun, concurrency: number): Promise<void> {
  const { opts } = ctx;
  const stock = d.slow ? opts.slowStock : opts.stock;
  const maxRunS = d.slow ? opts.slowMaxRunS : opts.maxRunS;
  const id = `${ctx.runId}-fs-${d.label}-${concurrency}`;
  await server.create([{ id, stock, shards: opts.shards }]);
  const stats0 = await server.stats();
  const m = await measuredLoad(
    ctx,
    server,
    {
      addr: server.addr,
      client: opts.client,
      connections: opts.connections,
      concurrency,
      couponPrefix: id,
      couponCount: 1,
      couponWidth: 0,
      idPrefix: `${id}-`,
      quantity: 1,
      stopOnSoldOut: true,
      durationMs: maxRunS * 1000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      perCoupon: false,
      epochMs: Date.now(),
    },
    `flash-sale ${d.label} c=${concurrency}`,
    { units: stock, seconds: maxRunS },
  );
  const [level] = await server.levels([id]);
  const storeSold = level?.sold ?? 0;
  const clientSold = m.summary.deducted;
  const soldOut = (m.summary.outcomes.SOLD_OUT ?? 0) > 0;
  const notes: string[] = [];
  if (!soldOut)
    notes.push(
      `stopped by ${d.slow ? '--slow-max-run' : '--max-run'} ${maxRunS}s after selling ${clientSold.toLocaleString('en')} of ${stock.toLocaleString('en')}`,
    );
  else if (storeSold < stock) notes.push(`answered SOLD_OUT with ${stock - storeSold} units still in the store`);
  const rec = record(
    'flash-sale',
    d.label,
    concurrency,
    stock,
    m,
    {
      oversold: Math.max(0, clientSold - stock, storeSold - stock),
      storeSold,
      clientSold,
      soldOut,
    },
    notes,
  );
  rec.serverStats = diffStats(stats0, await server.stats());
  ctx.runs.push(rec);
  ctx.onRun(rec);
}

export function diffStats(a: Record<string, number>, b: Record<string, number>): Record<string, number> | undefined {
  const keys = Object.keys(b);
  if (keys.length === 0) return undefined;
  return Object.fromEntries(keys.map((k) => [k, (b[k] ?? 0) - (a[k] ?? 0)]));
}
