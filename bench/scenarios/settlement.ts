// Settlement through the real pipeline (src/settlement: outbox -> relay -> JetStream -> settle -> MySQL):
//   drain   a backlog of deductions made with no workers running is drained by a fresh instance running
//           relay + settle; events/s as built (SHARDSTOCK_SETTLE_BATCH default) and one event per transaction;
//   lag     a flash sale with relay + settle running alongside: for the k-th unit, the time from the k-th
//           successful Deduct answer to MySQL's coupon row counting k units settled (polled every 50 ms).
// Progress is read from the coupon row itself over the benchmark's own connection: GetStock would also probe
// every Redis shard and may reuse the row for LEVEL_RECORD_TTL_MS (250 ms), which the lag would then include.
import { existsSync } from 'node:fs';
import { type Connection, createConnection, type RowDataPacket } from 'mysql2/promise';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.js';
import { CALL_TIMEOUT_MS, type BenchContext } from '../context.js';
import { serviceEnv, type ServerSpec } from '../designs.js';
import { SUCCESS_BUCKET_MS } from '../load-types.js';
import { sleep } from '../pool.js';
import type { SettlementRecord } from '../records.js';
import type { ServerHandle, ServerHost } from '../servers.js';
import { deleteNamespace, deleteSettlementStream } from '../stack-info.js';

const POLL_MS = 50;
const SETTLEMENT_DIR = fileURLToPath(new URL('../../src/settlement/settlement.ts', import.meta.url));

interface Sample {
  atMs: number;
  settled: number;
}

/** Units settled of one coupon (total − settled remaining), read straight from its MySQL row. */
class SettledReader {
  private constructor(private readonly conn: Connection) {}

  static async open(ctx: BenchContext): Promise<SettledReader> {
    return new SettledReader(await createConnection(ctx.opts.mysqlUrl));
  }

  async settled(couponId: string): Promise<number> {
    const [rows] = await this.conn.query<RowDataPacket[]>('select total_stock - settled_remaining as s from coupon where id = ?', [
      couponId,
    ]);
    return Number(rows[0]?.s ?? 0);
  }

  close(): Promise<void> {
    return this.conn.end();
  }
}

async function sellOut(
  ctx: BenchContext,
  server: ServerHandle,
  id: string,
  stock: number,
  concurrency: number,
  poll?: { reader: SettledReader; onPoll: (s: Sample) => void },
) {
  await server.create([{ id, stock, shards: ctx.opts.shards }]);
  const epochMs = Date.now();
  let polling = poll !== undefined;
  const poller = (async () => {
    while (polling) {
      const settled = await poll!.reader.settled(id);
      poll!.onPoll({ atMs: Date.now(), settled });
      await sleep(POLL_MS);
    }
  })();
  const summary = await ctx.load.run(
    {
      addr: server.addr,
      client: ctx.opts.client,
      connections: ctx.opts.connections,
      concurrency,
      couponPrefix: id,
      couponCount: 1,
      couponWidth: 0,
      idPrefix: `${id}-`,
      quantity: 1,
      stopOnSoldOut: true,
      durationMs: ctx.opts.maxRunS * 1000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      perCoupon: false,
      epochMs,
    },
    (p) =>
      ctx.progress.draw(`settlement: selling ${id.split('-').pop()}`, p.deducted, stock, `${p.deducted.toLocaleString('en')} deducted`),
  );
  polling = false;
  await poller;
  return { summary, epochMs };
}

/** Polls until `target` units are settled or the time runs out; returns the samples. */
async function waitSettled(
  ctx: BenchContext,
  reader: SettledReader,
  id: string,
  target: number,
  label: string,
  timeoutMs: number,
  samples: Sample[] = [],
): Promise<Sample[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = { atMs: Date.now(), settled: await reader.settled(id) };
    samples.push(s);
    ctx.progress.draw(label, s.settled, target, `${s.settled.toLocaleString('en')} settled`);
    if (s.settled >= target || Date.now() > deadline) return samples;
    await sleep(POLL_MS);
  }
}

/** settleBatch undefined: the pipeline as built (SHARDSTOCK_SETTLE_BATCH default). */
const drainNamespace = (ctx: BenchContext, tag: string) => `${ctx.runId}t${tag}`;

/** A server with no workers that fills a drain run's backlog. */
const fillerSpec = (ctx: BenchContext, tag: string): ServerSpec => ({
  label: `settle-fill-${tag}`,
  design: 'shardstock',
  env: serviceEnv(ctx, drainNamespace(ctx, tag), { SHARDSTOCK_ACK_LEVEL: 'leader' }),
});

async function drain(
  ctx: BenchContext,
  reader: SettledReader,
  noWorkers: ServerHandle,
  host: ServerHost,
  events: number,
  settleBatch: number | undefined,
  tag: string,
  timeoutMs: number,
) {
  const ns = drainNamespace(ctx, tag);
  const id = `${ctx.runId}-st-${tag}`;
  let workers: ServerHandle | undefined;
  try {
    let sold = 0;
    try {
      sold = (await sellOut(ctx, noWorkers, id, events, ctx.opts.stormConcurrency)).summary.deducted;
    } finally {
      await noWorkers.stop();
    }
    workers = await host.add(
      `settle-drain-${tag}`,
      'shardstock',
      serviceEnv(ctx, ns, {
        SHARDSTOCK_WORKERS: 'relay,settle',
        ...(settleBatch ? { SHARDSTOCK_SETTLE_BATCH: String(settleBatch) } : {}),
      }),
    );
    // CreateCoupon again (an idempotent replay) puts the coupon in this instance's catalog: its relay starts at once.
    await workers.create([{ id, stock: events, shards: ctx.opts.shards }]);
    const samples = await waitSettled(ctx, reader, id, sold, `settlement: draining ${tag}`, timeoutMs);
    ctx.progress.clear();
    // From the last poll before progress to the last poll. The relay may have started before the first poll
    // (its first sweep finds recent coupons with a backlog): then the rate is over the window observed.
    const firstMoving = samples.findIndex((s) => s.settled > 0);
    const last = samples[samples.length - 1]!;
    const from = samples[Math.max(0, firstMoving - 1)]!;
    const seconds = Math.max(0.001, (last.atMs - from.atMs) / 1000);
    return {
      events: last.settled - from.settled,
      seconds,
      eventsPerS: (last.settled - from.settled) / seconds,
      settleBatch: settleBatch ?? loadConfig({}).settleBatch,
      complete: last.settled >= sold,
      sold,
    };
  } finally {
    await workers?.stop();
    await deleteNamespace(ns).catch(() => 0);
    await deleteSettlementStream(ns).catch(() => {});
  }
}

/** Lag of the k-th unit: settled time (first poll counting k) minus deducted time (k-th success bucket). */
function lagPercentiles(successBuckets: Uint32Array, epochMs: number, samples: Sample[], units: number) {
  const deductedAt = new Float64Array(units);
  let k = 0;
  for (let b = 0; b < successBuckets.length && k < units; b++) {
    for (let c = 0; c < successBuckets[b]! && k < units; c++) deductedAt[k++] = epochMs + (b + 1) * SUCCESS_BUCKET_MS;
  }
  const lags: number[] = [];
  let si = 0;
  for (let u = 0; u < k; u++) {
    while (si < samples.length && samples[si]!.settled < u + 1) si++;
    if (si >= samples.length) break;
    lags.push(Math.max(0, samples[si]!.atMs - deductedAt[u]!));
  }
  lags.sort((a, b) => a - b);
  const q = (p: number) => lags[Math.min(lags.length - 1, Math.max(0, Math.ceil(p * lags.length) - 1))] ?? 0;
  return { measured: lags.length, p50Ms: q(0.5), p99Ms: q(0.99), maxMs: lags[lags.length - 1] ?? 0 };
}

const lagNamespace = (ctx: BenchContext) => `${ctx.runId}tl`;

async function lagDuringFlashSale(ctx: BenchContext, reader: SettledReader, server: ServerHandle, units: number) {
  const ns = lagNamespace(ctx);
  const id = `${ctx.runId}-st-lag`;
  try {
    const samples: Sample[] = [];
    const { summary, epochMs } = await sellOut(ctx, server, id, units, ctx.opts.stormConcurrency, {
      reader,
      onPoll: (s) => samples.push(s),
    });
    await waitSettled(ctx, reader, id, summary.deducted, 'settlement: catching up', ctx.opts.maxRunS * 1000 * 2, samples);
    ctx.progress.clear();
    const lag = lagPercentiles(summary.successBuckets, epochMs, samples, summary.deducted);
    const firstDeduct = summary.successBuckets.findIndex((c) => c > 0);
    const allSettled = samples.find((s) => s.settled >= summary.deducted);
    return {
      units: summary.deducted,
      p50Ms: lag.p50Ms,
      p99Ms: lag.p99Ms,
      maxMs: lag.maxMs,
      deductRate: summary.deductRate,
      settledAllAfterS: allSettled ? (allSettled.atMs - (epochMs + firstDeduct * SUCCESS_BUCKET_MS)) / 1000 : Number.NaN,
      measured: lag.measured,
      oversold: Math.max(0, summary.deducted - units),
    };
  } finally {
    await server.stop();
    await deleteNamespace(ns).catch(() => 0);
    await deleteSettlementStream(ns).catch(() => {});
  }
}

export interface SettlementServers {
  fillBatched: ServerHandle;
  fillSingle: ServerHandle;
  lag: ServerHandle;
}

/** Started with everything else: two fillers (no workers) and the lag server (relay + settle). The drain
 * servers start later in `drainHost`, each once its backlog is in place. */
export function settlementSpecs(ctx: BenchContext): { fillBatched: ServerSpec; fillSingle: ServerSpec; lag: ServerSpec } {
  return {
    fillBatched: fillerSpec(ctx, 'b'),
    fillSingle: fillerSpec(ctx, '1'),
    lag: { label: 'settle-lag', design: 'shardstock', env: serviceEnv(ctx, lagNamespace(ctx), { SHARDSTOCK_WORKERS: 'relay,settle' }) },
  };
}

export const settlementAvailable = () => existsSync(SETTLEMENT_DIR);

/** Every namespace the settlement scenario uses, for clean-up after a failure (keys and streams). */
export const settlementNamespaces = (ctx: BenchContext) => [drainNamespace(ctx, 'b'), drainNamespace(ctx, '1'), lagNamespace(ctx)];

export async function settlement(ctx: BenchContext, servers: SettlementServers, drainHost: ServerHost): Promise<SettlementRecord> {
  const notes: string[] = [];
  const events = ctx.opts.settleEvents;
  const reader = await SettledReader.open(ctx);
  try {
    const batched = await drain(ctx, reader, servers.fillBatched, drainHost, events, undefined, 'b', ctx.opts.maxRunS * 2000);
    if (!batched.complete) notes.push(`batched drain stopped before the end: ${batched.events} of ${batched.sold} settled`);
    if (batched.seconds < 1)
      notes.push(
        `the backlog drained in ${batched.seconds.toFixed(2)} s: with polls every ${POLL_MS} ms the rate is rough (use more --settle-events)`,
      );
    ctx.progress.line(
      `settlement batched: ${Math.round(batched.eventsPerS).toLocaleString('en')} events/s (${batched.events} events in ${batched.seconds.toFixed(2)} s)`,
    );
    // One event per transaction is slow: a smaller backlog, and the rate from what settled within --max-run.
    const single = await drain(
      ctx,
      reader,
      servers.fillSingle,
      drainHost,
      Math.min(events, ctx.opts.quick ? 500 : 5_000),
      1,
      '1',
      Math.min(ctx.opts.maxRunS, ctx.opts.quick ? 2 : 20) * 1000,
    );
    if (!single.complete) notes.push(`one-per-transaction drain stopped by its time limit: ${single.events} of ${single.sold} settled`);
    ctx.progress.line(`settlement one per transaction: ${Math.round(single.eventsPerS).toLocaleString('en')} events/s`);
    const lag = await lagDuringFlashSale(ctx, reader, servers.lag, events);
    if (lag.oversold > 0) notes.push(`OVERSOLD: ${lag.oversold} units beyond the stock in the lag run`);
    if (lag.measured < lag.units)
      notes.push(`lag measured for ${lag.measured} of ${lag.units} units (the rest did not settle within the time limit)`);
    notes.push(`lag is read by polling the coupon's MySQL row every ${POLL_MS} ms: figures carry up to ~${POLL_MS} ms of sampling error`);
    ctx.progress.line(`settlement lag: p50 ${Math.round(lag.p50Ms)} ms, p99 ${Math.round(lag.p99Ms)} ms`);
    return {
      available: true,
      batched: { events: batched.events, seconds: batched.seconds, eventsPerS: batched.eventsPerS, settleBatch: batched.settleBatch },
      single: { events: single.events, seconds: single.seconds, eventsPerS: single.eventsPerS, settleBatch: single.settleBatch },
      lag: {
        units: lag.units,
        p50Ms: lag.p50Ms,
        p99Ms: lag.p99Ms,
        maxMs: lag.maxMs,
        deductRate: lag.deductRate,
        settledAllAfterS: lag.settledAllAfterS,
      },
      oversold: lag.oversold,
      notes,
    };
  } finally {
    await reader.close().catch(() => {});
    await Promise.all([servers.fillBatched.stop(), servers.fillSingle.stop(), servers.lag.stop()]);
  }
}
