// The report as saved in report.json, and how the ratios and targets are derived from the runs.
import type { BenchOptions } from '../options.js';
import type { HoldsRecord, RunRecord, SettlementRecord } from '../records.js';

export interface Ratio {
  scenario: string;
  design: string;
  baseline: string;
  /** In-flight level both were measured at, or `best` (best of each sweep). */
  at: number | 'best';
  service: number;
  baselineValue: number;
  ratio: number;
}

export interface Target {
  name: string;
  want: string;
  measured: string;
  /** null: not measured in this run. */
  pass: boolean | null;
}

/** CPU one flash-sale deduction costs each design (its best run), and what that allows on this box. */
export interface CpuBudget {
  design: string;
  concurrency: number;
  serverUs: number;
  redisUs: number;
  /** Counted for the MySQL-only design only: the others do not touch MariaDB on their hot path. */
  mysqlUs: number;
  clientUs: number;
  /** Server + Redis (+ MySQL): what the design itself costs per deduction. */
  stackUs: number;
  /** cores x 1 s / (stack + client) per call: throughput if the box did nothing else. */
  ceilingPerS: number;
}

export interface BenchReport {
  version: 1;
  mode: 'quick' | 'full';
  startedAt: string;
  finishedAt: string;
  durationS: number;
  machine: { cpus: number; cpuModel: string; node: string; platform: string; loadAvgAtStart: number[] };
  options: BenchOptions;
  loadGenerator: string;
  runs: RunRecord[];
  settlement?: SettlementRecord | undefined;
  /** The reserve-confirm scenario: Reserve + Confirm and DeductOrder against Deduct. */
  holds?: HoldsRecord | undefined;
  ratios: Ratio[];
  cpuBudget: CpuBudget[];
  targets: Target[];
  oversoldTotal: number;
}

export const SERVICE = 'shardstock';

const fsRuns = (runs: RunRecord[], design: string) => runs.filter((r) => r.scenario === 'flash-sale' && r.design === design);

function best(runs: RunRecord[], design: string): number | undefined {
  const rs = fsRuns(runs, design);
  return rs.length ? Math.max(...rs.map((r) => r.deductRate)) : undefined;
}

export function ratios(runs: RunRecord[]): Ratio[] {
  const out: Ratio[] = [];
  const services = [...new Set(runs.filter((r) => r.design.startsWith(SERVICE)).map((r) => r.design))];
  const baselines = [...new Set(runs.filter((r) => !r.design.startsWith(SERVICE)).map((r) => r.design))];
  for (const svc of services) {
    for (const b of baselines) {
      const s = best(runs, svc);
      const bv = best(runs, b);
      if (s !== undefined && bv !== undefined && bv > 0)
        out.push({ scenario: 'flash-sale', design: svc, baseline: b, at: 'best', service: s, baselineValue: bv, ratio: s / bv });
      for (const r of fsRuns(runs, svc)) {
        const o = fsRuns(runs, b).find((x) => x.concurrency === r.concurrency);
        if (o && o.deductRate > 0)
          out.push({
            scenario: 'flash-sale',
            design: svc,
            baseline: b,
            at: r.concurrency,
            service: r.deductRate,
            baselineValue: o.deductRate,
            ratio: r.deductRate / o.deductRate,
          });
      }
      for (const sc of ['many-coupons', 'sold-out-storm'] as const) {
        const r = runs.find((x) => x.scenario === sc && x.design === svc);
        const o = runs.find((x) => x.scenario === sc && x.design === b);
        if (r && o && o.throughput > 0)
          out.push({
            scenario: sc,
            design: svc,
            baseline: b,
            at: r.concurrency,
            service: r.throughput,
            baselineValue: o.throughput,
            ratio: r.throughput / o.throughput,
          });
      }
    }
  }
  return out;
}

export function cpuBudget(runs: RunRecord[], cores: number): CpuBudget[] {
  return [...new Set(runs.map((r) => r.design))].flatMap((design) => {
    const rs = fsRuns(runs, design);
    if (rs.length === 0) return [];
    const r = rs.reduce((a, b) => (b.deductRate > a.deductRate ? b : a));
    const mysqlUs = design === 'mysql' ? r.cpu.mysqlUsPerReq : 0;
    const stackUs = r.cpu.serverUsPerReq + r.cpu.redisUsPerReq + mysqlUs;
    const total = stackUs + r.cpu.clientUsPerReq;
    return [
      {
        design,
        concurrency: r.concurrency,
        serverUs: r.cpu.serverUsPerReq,
        redisUs: r.cpu.redisUsPerReq,
        mysqlUs,
        clientUs: r.cpu.clientUsPerReq,
        stackUs,
        ceilingPerS: total > 0 ? (cores * 1e6) / total : 0,
      },
    ];
  });
}

const x = (v: number) => `${v.toFixed(2)}x`;
const n = (v: number) => Math.round(v).toLocaleString('en');

export function targets(runs: RunRecord[], settlement: SettlementRecord | undefined): Target[] {
  const out: Target[] = [];
  const push = (name: string, want: string, measured: string | undefined, pass: boolean | null) =>
    out.push({ name, want, measured: measured ?? 'not measured', pass: measured === undefined ? null : pass });
  // The targets of issue #14 compare designs at 256 in flight within one run: absolute rates drift on a shared box.
  const fsAt = (design: string) => fsRuns(runs, design).find((r) => r.concurrency === 256);
  const svc = fsAt(SERVICE);
  const noop = fsAt('noop');
  const single = fsAt('single-key');
  const ratio = (a: number, b: number, unit = '/s') => `${x(a / b)} (${n(a)} vs ${n(b)}${unit})`;

  push(
    'flash sale at 256 vs single-key',
    '>= 1.0x',
    svc && single && ratio(svc.deductRate, single.deductRate),
    !!svc && !!single && svc.deductRate >= single.deductRate,
  );
  push(
    'flash sale at 256 vs no-op',
    '>= 0.6x',
    svc && noop && ratio(svc.deductRate, noop.deductRate),
    !!svc && !!noop && svc.deductRate >= 0.6 * noop.deductRate,
  );
  push(
    'p99 at 256 vs no-op p99',
    '<= 1.5x',
    svc && noop && `${x(svc.p99Ms / noop.p99Ms)} (${svc.p99Ms.toFixed(1)} vs ${noop.p99Ms.toFixed(1)} ms)`,
    !!svc && !!noop && svc.p99Ms <= 1.5 * noop.p99Ms,
  );
  push(
    'Redis CPU per deduction, all nodes (256)',
    '<= 30 us',
    svc && `${svc.cpu.redisUsPerReq.toFixed(0)} us`,
    !!svc && svc.cpu.redisUsPerReq <= 30,
  );
  const many = runs.find((r) => r.scenario === 'many-coupons' && r.design === SERVICE);
  push(
    'many coupons vs flash sale rate',
    '>= 0.8x',
    many && svc && ratio(many.deductRate, svc.deductRate),
    !!many && !!svc && many.deductRate >= 0.8 * svc.deductRate,
  );
  const storm = runs.find((r) => r.scenario === 'sold-out-storm' && r.design === SERVICE);
  push(
    "sold-out storm vs single-key's flash sale",
    '>= 1.0x',
    storm && single && ratio(storm.throughput, single.deductRate),
    !!storm && !!single && storm.throughput >= single.deductRate,
  );
  // Older targets, kept for continuity: best of the sweep.
  const bestSvc = best(runs, SERVICE);
  for (const [baseline, want, label] of [
    ['mysql', 4, 'MySQL-only'],
    ['lock', 10, 'lock'],
  ] as const) {
    const b = best(runs, baseline);
    const measured = bestSvc !== undefined && b !== undefined ? ratio(bestSvc, b) : undefined;
    push(`flash sale vs ${label} (best of sweep)`, `>= ${want}x`, measured, !!bestSvc && !!b && bestSvc >= want * b);
  }

  const batched = settlement?.batched;
  out.push(
    batched
      ? {
          name: 'settlement events/s (batched)',
          want: '>= 15,000/s',
          measured: `${n(batched.eventsPerS)}/s`,
          pass: batched.eventsPerS >= 15_000,
        }
      : { name: 'settlement events/s (batched)', want: '>= 15,000/s', measured: settlement?.reason ?? 'not measured', pass: null },
  );
  const lag = settlement?.lag;
  out.push(
    lag
      ? {
          name: 'settlement lag p99 during a flash sale',
          want: '<= 0.5 s',
          measured: `${(lag.p99Ms / 1000).toFixed(2)} s (p50 ${(lag.p50Ms / 1000).toFixed(2)} s)`,
          pass: lag.p99Ms <= 500,
        }
      : { name: 'settlement lag p99 during a flash sale', want: '<= 0.5 s', measured: settlement?.reason ?? 'not measured', pass: null },
  );

  const oversold = runs.reduce((s, r) => s + r.oversold, 0) + (settlement?.oversold ?? 0);
  out.push({ name: 'oversold units, every design and scenario', want: '= 0', measured: String(oversold), pass: oversold === 0 });
  return out;
}
