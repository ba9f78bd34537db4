// One measured run: CPU snapshots of the machine, the server and the stack around a load run, then the
// oversell check against the stock and against the design's own store.
import type { BenchContext } from './context.js';
import type { LoadSummary, RunSpec } from './load.js';
import type { Scenario } from './options.js';
import type { CpuFigures, RunRecord } from './records.js';
import type { ServerHandle } from './servers.js';
import { delta, snapshot } from './system-cpu.js';

export interface Measured {
  summary: LoadSummary;
  cpu: CpuFigures;
}

export async function measuredLoad(
  ctx: BenchContext,
  server: ServerHandle,
  spec: RunSpec,
  label: string,
  total: { units: number; seconds: number },
): Promise<Measured> {
  const stackPids = [...ctx.pids.redis, ...ctx.pids.mysql, server.pid];
  const s0 = snapshot(stackPids);
  const c0 = await server.cpu();
  const started = Date.now();
  const summary = await ctx.load.run(spec, (p) => {
    const s = (Date.now() - started) / 1000;
    // Progress by units sold when the run goes until sold out, else by time.
    const [done, of] = spec.stopOnSoldOut ? [p.deducted, total.units] : [s, total.seconds];
    ctx.progress.draw(
      label,
      done,
      of,
      `${p.completed.toLocaleString('en')} calls  ${Math.round(p.completed / Math.max(s, 0.001)).toLocaleString('en')}/s  errors ${p.errors}`,
    );
  });
  const c1 = await server.cpu();
  const s1 = snapshot(stackPids);
  ctx.progress.clear();
  const d = delta(s0, s1);
  const wallUs = summary.elapsedS * 1e6 || 1;
  const serverUs = c1.userUs + c1.systemUs - c0.userUs - c0.systemUs;
  const perReq = (us: number) => (summary.completed > 0 ? us / summary.completed : 0);
  return {
    summary,
    cpu: {
      serverPct: (serverUs / wallUs) * 100,
      serverUsPerReq: perReq(serverUs),
      clientPct: (summary.clientCpuUs / wallUs) * 100,
      clientUsPerReq: perReq(summary.clientCpuUs),
      redisPct: (d.procUs(ctx.pids.redis) / wallUs) * 100,
      redisUsPerReq: perReq(d.procUs(ctx.pids.redis)),
      mysqlPct: (d.procUs(ctx.pids.mysql) / wallUs) * 100,
      mysqlUsPerReq: perReq(d.procUs(ctx.pids.mysql)),
      machinePct: d.machinePct,
    },
  };
}

export function record(
  scenario: Scenario,
  design: string,
  concurrency: number,
  stock: number,
  m: Measured,
  check: { oversold: number; storeSold: number; clientSold: number; soldOut: boolean },
  notes: string[] = [],
): RunRecord {
  const s = m.summary;
  if (s.errorCount > 0)
    notes.push(
      `${s.errorCount} failed calls (${Object.entries(s.errors)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}); first: ${s.firstError}`,
    );
  return {
    scenario,
    design,
    concurrency,
    stock,
    requests: s.completed,
    deducted: s.deducted,
    outcomes: s.outcomes,
    errors: s.errors,
    errorCount: s.errorCount,
    firstError: s.firstError,
    elapsedS: s.elapsedS,
    throughput: s.throughput,
    deductRate: s.deductRate,
    // Whole seconds only (the last one is partial); a run shorter than a second has its mean.
    peakSecond: s.elapsedS >= 1 ? Math.max(0, ...s.perSecond.slice(0, Math.floor(s.elapsedS))) : s.throughput,
    perSecond: s.perSecond,
    p50Ms: s.p50Ms,
    p99Ms: s.p99Ms,
    p999Ms: s.p999Ms,
    maxMs: s.maxMs,
    oversold: check.oversold,
    storeSold: check.storeSold,
    storeMinusClient: check.storeSold - check.clientSold,
    soldOut: check.soldOut,
    cpu: m.cpu,
    notes,
  };
}
