// `npm run bench`: brings up (or reuses) the local stack, runs the scenarios against the service and the
// baselines, prints a table as it goes and writes JSON, Markdown and an SVG chart. See --help.
import { cpus, loadavg } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { BenchContext } from './context.js';
import { designRuns, startDesign } from './designs.js';
import { LoadGenerators } from './load.js';
import { HELP, parseOptions, UsageError, type BenchOptions } from './options.js';
import { Progress } from './progress.js';
import type { ServerHandle } from './servers.js';
import type { RunRecord } from './records.js';
import { textTable } from './report/format.js';
import { ratios, targets, type BenchReport } from './report/model.js';
import { RUN_HEAD, RUN_RIGHT, runRow } from './report/runs-table.js';
import { writeReport } from './report/write.js';
import { flashSale } from './scenarios/flash-sale.js';
import { manyCoupons } from './scenarios/many-coupons.js';
import { settlement } from './scenarios/settlement.js';
import { soldOutStorm } from './scenarios/sold-out-storm.js';
import { deleteNamespace, ensureStack, recreateDatabase, stackPids } from './stack-info.js';

/** Starts every server at once; if one fails, stops the others and fails. */
async function startAll(starts: (() => Promise<ServerHandle>)[]): Promise<ServerHandle[]> {
  const settled = await Promise.allSettled(starts.map((f) => f()));
  const failed = settled.find((r) => r.status === 'rejected');
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<ServerHandle>).value);
  await Promise.all(settled.map((r) => (r.status === 'fulfilled' ? r.value.stop() : undefined)));
  throw failed.reason;
}

async function main(opts: BenchOptions): Promise<number> {
  const startedAt = new Date();
  const elapsed = () => `${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)}s`;
  const loadAvgAtStart = loadavg();
  const progress = new Progress(opts.progress && process.stderr.isTTY === true);
  progress.line(`shardstock bench (${opts.quick ? 'quick' : 'full'}): scenarios ${opts.scenarios.join(', ')}; designs ${opts.designs.join(', ')}`);
  await ensureStack();
  await recreateDatabase(opts.mysqlUrl);
  const runId = `b${Date.now().toString(36).slice(-6)}${randomBytes(1).toString('hex')}`;
  const load = await LoadGenerators.start(opts.loadWorkers);
  let printedHead = false;
  const ctx: BenchContext = {
    opts, runId, load, progress, runs: [],
    pids: await stackPids(opts.mysqlUrl),
    onRun(r: RunRecord) {
      const table = textTable(RUN_HEAD, [runRow(r)], RUN_RIGHT).split('\n');
      if (!printedHead) progress.line(`${table[0]}\n${table[1]}`);
      printedHead = true;
      progress.line(table[2]!);
      for (const n of r.notes) progress.line(`    ${n}`);
    },
  };

  try {
    // All servers start together (module loading dominates start-up on a small box); each is stopped, and
    // its keys deleted, as soon as its scenarios are done.
    const designs = designRuns(ctx);
    const t0 = Date.now();
    const servers = await startAll(designs.map((d) => () => startDesign(ctx, d)));
    if (designs.length) progress.line(`[${elapsed()}] ${designs.length} servers started in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    for (const [i, d] of designs.entries()) {
      const server = servers[i]!;
      try {
        for (const sc of d.scenarios) {
          if (sc === 'flash-sale') await flashSale(ctx, server, d);
          else if (sc === 'many-coupons') await manyCoupons(ctx, server, d);
          else if (sc === 'sold-out-storm') await soldOutStorm(ctx, server, d);
        }
      } finally {
        await server.stop();
        await deleteNamespace(d.namespace).catch((err: Error) => progress.line(`clean-up of ${d.namespace} failed: ${err.message}`));
      }
    }
    if (opts.scenarios.includes('settlement')) ctx.settlement = await settlement(ctx);
  } finally {
    progress.clear();
    await load.close();
  }

  const finishedAt = new Date();
  const report: BenchReport = {
    version: 1,
    mode: opts.quick ? 'quick' : 'full',
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationS: (finishedAt.getTime() - startedAt.getTime()) / 1000,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim() ?? 'unknown', node: process.versions.node, platform: `${process.platform} ${process.arch}`, loadAvgAtStart },
    options: opts,
    loadGenerator: `${opts.loadWorkers} process(es), ${opts.connections} HTTP/2 connection(s) each, ${opts.client === 'http2' ? 'raw node:http2 gRPC framing' : 'grpc-js makeUnaryRequest'}, requests pre-encoded`,
    runs: ctx.runs,
    settlement: ctx.settlement,
    ratios: ratios(ctx.runs),
    targets: targets(ctx.runs, ctx.settlement),
    oversoldTotal: ctx.runs.reduce((s, r) => s + r.oversold, 0) + (ctx.settlement?.oversold ?? 0),
  };
  const files = writeReport(report, opts.out, opts.docs);
  const t = report.targets.map((x) => [x.name, x.want, x.measured, x.pass === null ? 'n/a' : x.pass ? 'PASS' : 'MISS']);
  process.stdout.write(`\n${textTable(['target', 'want', 'measured', 'result'], t)}\n\n`);
  if (ctx.settlement) {
    const s = ctx.settlement;
    process.stdout.write(`settlement: ${s.available ? [
      s.batched && `batched ${Math.round(s.batched.eventsPerS)} ev/s`,
      s.single && `one-per-transaction ${Math.round(s.single.eventsPerS)} ev/s`,
      s.lag && `lag p50 ${Math.round(s.lag.p50Ms)} ms p99 ${Math.round(s.lag.p99Ms)} ms`,
    ].filter(Boolean).join(', ') : `not available (${s.reason})`}\n`);
  }
  process.stdout.write(`wrote ${files.join(', ')}\n`);
  if (report.oversoldTotal > 0) {
    process.stderr.write(`OVERSOLD: ${report.oversoldTotal} units were handed out beyond the stock\n`);
    return 3;
  }
  return 0;
}

try {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) {
    process.stdout.write(HELP);
    process.exit(0);
  }
  process.exit(await main(opts));
} catch (err) {
  if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`${(err as Error).message}\n\n${HELP}`);
    process.exit(2);
  }
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
