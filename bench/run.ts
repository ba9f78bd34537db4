// `npm run bench`: brings up (or reuses) the local stack, runs the scenarios against the service and the
// baselines, prints a table as it goes and writes JSON, Markdown and an SVG chart. See --help.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { BenchContext } from './context.js';
import { designRuns, serverSpec, type DesignRun, type HostName, type ServerSpec } from './designs.js';
import { LoadGenerators } from './load.js';
import { HELP, parseOptions, UsageError, type BenchOptions } from './options.js';
import { Progress } from './progress.js';
import { ServerHost } from './servers.js';
import type { RunRecord } from './records.js';
import { textTable } from './report/format.js';
import { cpuBudget, ratios, targets, type BenchReport } from './report/model.js';
import { RUN_HEAD, RUN_RIGHT, runRow } from './report/runs-table.js';
import { writeReport } from './report/write.js';
import { flashSale } from './scenarios/flash-sale.js';
import { manyCoupons } from './scenarios/many-coupons.js';
import { settlement, settlementAvailable, settlementNamespaces, settlementSpecs } from './scenarios/settlement.js';
import { soldOutStorm } from './scenarios/sold-out-storm.js';
import { reserveConfirm } from './scenarios/reserve-confirm.js';
import { warmUp } from './scenarios/warm-up.js';
import { deleteNamespace, deleteSettlementStream, ensureStack, recreateDatabase, stackPids } from './stack-info.js';

/** Starts the server processes and, in them, every server, all at once; if anything fails, ends them all. */
async function startServers(ctx: BenchContext, designs: DesignRun[], withSettlement: boolean) {
  const names = new Set<HostName>(designs.map((d) => d.host));
  mkdirSync(ctx.opts.out, { recursive: true });
  if (withSettlement) names.add('service-2').add('settlement');
  const hosts = new Map<HostName, ServerHost>();
  // Every server process, the baselines' too: set side by side, their profiles show what the service spends
  // beyond the gRPC stack they share.
  const profile = (n: HostName) =>
    ctx.opts.profile
      ? ['--cpu-prof', '--cpu-prof-dir', `${ctx.opts.out}/profiles`, '--cpu-prof-name', `${n}-${Date.now()}.cpuprofile`]
      : [];
  const st = withSettlement ? settlementSpecs(ctx) : undefined;
  const placed: [HostName, ServerSpec][] = [
    ...designs.map((d): [HostName, ServerSpec] => [d.host, serverSpec(ctx, d)]),
    ...(st
      ? ([
          ['service-2', st.fillBatched],
          ['service-2', st.fillSingle],
          ['settlement', st.lag],
        ] as [HostName, ServerSpec][])
      : []),
  ];
  const started = await Promise.allSettled(
    [...names].map(async (n) => {
      const flags = n === 'baselines' ? profile(n) : [...ctx.opts.nodeFlags, ...profile(n)];
      const host = await ServerHost.start(n, flags, join(ctx.opts.out, `server-${n}.log`));
      hosts.set(n, host);
      await host.preload(placed.filter(([h]) => h === n).map(([, s]) => s.design));
    }),
  );
  const closeAll = () => Promise.all([...hosts.values()].map((h) => h.close()));
  try {
    for (const r of started) if (r.status === 'rejected') throw r.reason;
    const add = ([host, spec]: [HostName, ServerSpec]) => hosts.get(host)!.add(spec.label, spec.design, spec.env);
    // The first service server runs the migrations on the fresh database; the rest start after it, together.
    const first = placed.findIndex(([, s]) => s.design === 'shardstock');
    const firstServer = first >= 0 ? await add(placed[first]!) : undefined;
    const servers = await Promise.all(placed.map((p, i) => (i === first ? firstServer! : add(p))));
    const designServers = servers.slice(0, designs.length);
    const [fillBatched, fillSingle, lag] = servers.slice(designs.length);
    const settlementServers = st ? { fillBatched: fillBatched!, fillSingle: fillSingle!, lag: lag! } : undefined;
    return { hosts, closeAll, designServers, settlementServers };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** --render: the outputs again from a saved report.json (derived figures recomputed). */
function rerender(file: string, opts: BenchOptions): number {
  const saved = JSON.parse(readFileSync(file, 'utf8')) as BenchReport;
  for (const r of saved.runs) {
    const perReq = (pct: number) => (r.requests > 0 ? (pct * r.elapsedS * 1e4) / r.requests : 0);
    r.cpu.redisUsPerReq ??= perReq(r.cpu.redisPct);
    r.cpu.mysqlUsPerReq ??= perReq(r.cpu.mysqlPct);
  }
  const report: BenchReport = {
    ...saved,
    ratios: ratios(saved.runs),
    cpuBudget: cpuBudget(saved.runs, saved.machine.cpus),
    targets: targets(saved.runs, saved.settlement),
  };
  process.stdout.write(`wrote ${writeReport(report, opts.out, opts.docs).join(', ')}\n`);
  return 0;
}

async function main(opts: BenchOptions): Promise<number> {
  const startedAt = new Date();
  const elapsed = () => `${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)}s`;
  const loadAvgAtStart = loadavg();
  const progress = new Progress(opts.progress && process.stderr.isTTY === true);
  progress.line(
    `shardstock bench (${opts.quick ? 'quick' : 'full'}): scenarios ${opts.scenarios.join(', ')}; designs ${opts.designs.join(', ')}`,
  );
  await ensureStack();
  await recreateDatabase(opts.mysqlUrl);
  const runId = `b${Date.now().toString(36).slice(-6)}${randomBytes(1).toString('hex')}`;
  const load = await LoadGenerators.start(opts.loadWorkers);
  let printedHead = false;
  const ctx: BenchContext = {
    opts,
    runId,
    load,
    progress,
    runs: [],
    pids: await stackPids(opts.mysqlUrl),
    onRun(r: RunRecord) {
      const table = textTable(RUN_HEAD, [runRow(r)], RUN_RIGHT).split('\n');
      if (!printedHead) progress.line(`${table[0]}\n${table[1]}`);
      printedHead = true;
      progress.line(table[2]!);
      for (const n of r.notes) progress.line(`    ${n}`);
    },
  };

  let closeAll = async (): Promise<unknown> => undefined;
  const pending = new Set<string>();
  let settlementStarted = false;
  const cleanUp = async (namespace: string) => {
    pending.delete(namespace);
    await deleteNamespace(namespace).catch((err: Error) => progress.line(`clean-up of ${namespace} failed: ${err.message}`));
  };
  try {
    // Servers start together (module loading dominates start-up on a small box); each is stopped, and its
    // keys deleted, as soon as its scenarios are done.
    const designs = designRuns(ctx);
    for (const d of designs) pending.add(d.namespace);
    const withSettlement = opts.scenarios.includes('settlement') && settlementAvailable();
    settlementStarted = withSettlement;
    if (withSettlement) for (const ns of settlementNamespaces(ctx)) pending.add(ns);
    const t0 = Date.now();
    const started = await startServers(ctx, designs, withSettlement);
    closeAll = started.closeAll;
    progress.line(
      `[${elapsed()}] ${started.hosts.size} server processes, ${designs.length + (withSettlement ? 3 : 0)} servers started in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
    for (const [i, d] of designs.entries()) await warmUp(ctx, started.designServers[i]!, d);
    // Flash sale: level by level, every design at one level before the next level, so that a busy spell of
    // a shared box falls on several designs rather than on all the runs of one.
    for (const concurrency of opts.concurrency) {
      for (const [i, d] of designs.entries()) {
        if (d.scenarios.includes('flash-sale') && d.concurrency.includes(concurrency))
          await flashSale(ctx, started.designServers[i]!, d, concurrency);
      }
    }
    for (const [i, d] of designs.entries()) {
      const server = started.designServers[i]!;
      try {
        for (const sc of d.scenarios) {
          if (sc === 'many-coupons') await manyCoupons(ctx, server, d);
          else if (sc === 'sold-out-storm') await soldOutStorm(ctx, server, d);
          else if (sc === 'reserve-confirm') ctx.holds = await reserveConfirm(ctx, server, d);
        }
      } finally {
        await server.stop();
        await cleanUp(d.namespace);
      }
    }
    if (started.settlementServers) {
      ctx.settlement = await settlement(ctx, started.settlementServers, started.hosts.get('settlement')!);
      // It cleaned up after itself.
      for (const ns of settlementNamespaces(ctx)) pending.delete(ns);
      settlementStarted = false;
    } else if (opts.scenarios.includes('settlement'))
      ctx.settlement = { available: false, reason: 'src/settlement is not built yet (issue #4)', notes: [] };
  } finally {
    progress.clear();
    await closeAll();
    await load.close();
    // Keys (and settlement streams) of servers a failure stopped early.
    for (const ns of [...pending]) await cleanUp(ns);
    if (settlementStarted) {
      for (const ns of settlementNamespaces(ctx)) await deleteSettlementStream(ns).catch(() => {});
    }
  }

  const finishedAt = new Date();
  const report: BenchReport = {
    version: 1,
    mode: opts.quick ? 'quick' : 'full',
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationS: (finishedAt.getTime() - startedAt.getTime()) / 1000,
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      node: process.versions.node,
      platform: `${process.platform} ${process.arch}`,
      loadAvgAtStart,
    },
    options: opts,
    loadGenerator: `${opts.loadWorkers} process(es), ${opts.connections} HTTP/2 connection(s) each, ${opts.client === 'http2' ? 'raw node:http2 gRPC framing' : 'grpc-js makeUnaryRequest'}, requests pre-encoded`,
    runs: ctx.runs,
    settlement: ctx.settlement,
    holds: ctx.holds,
    ratios: ratios(ctx.runs),
    cpuBudget: cpuBudget(ctx.runs, cpus().length),
    targets: targets(ctx.runs, ctx.settlement),
    oversoldTotal: ctx.runs.reduce((s, r) => s + r.oversold, 0) + (ctx.settlement?.oversold ?? 0) + (ctx.holds?.oversold ?? 0),
  };
  const files = writeReport(report, opts.out, opts.docs);
  const t = report.targets.map((x) => [x.name, x.want, x.measured, x.pass === null ? 'n/a' : x.pass ? 'PASS' : 'MISS']);
  process.stdout.write(`\n${textTable(['target', 'want', 'measured', 'result'], t)}\n\n`);
  if (ctx.settlement) {
    const s = ctx.settlement;
    process.stdout.write(
      `settlement: ${
        s.available
          ? [
              s.batched && `batched ${Math.round(s.batched.eventsPerS)} ev/s`,
              s.single && `one-per-transaction ${Math.round(s.single.eventsPerS)} ev/s`,
              s.lag && `lag p50 ${Math.round(s.lag.p50Ms)} ms p99 ${Math.round(s.lag.p99Ms)} ms`,
            ]
              .filter(Boolean)
              .join(', ')
          : `not available (${s.reason})`
      }\n`,
    );
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
  process.exit(opts.render ? rerender(opts.render, opts) : await main(opts));
} catch (err) {
  if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`${(err as Error).message}\n\n${HELP}`);
    process.exit(2);
  }
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
