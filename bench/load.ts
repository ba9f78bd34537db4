// The orchestrator's side of the load generators: a few bench/load-worker.ts processes started once and
// reused; a run splits the in-flight requests between them and merges what they report.
import type { ChildProcess } from 'node:child_process';
import { forkTs } from './child.js';
import { Histogram } from './histogram.js';
import type { LoadJob, LoadProgress, LoadResult } from './load-types.js';

export type RunSpec = Omit<LoadJob, 'concurrency' | 'idPrefix' | 'maxRequests'> & {
  concurrency: number;
  idPrefix: string;
  maxRequests?: number;
};

export interface LoadSummary {
  sent: number;
  completed: number;
  deducted: number;
  outcomes: Record<string, number>;
  errors: Record<string, number>;
  errorCount: number;
  firstError: string | undefined;
  elapsedS: number;
  throughput: number;
  deductRate: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  perSecond: number[];
  clientCpuUs: number;
  successBuckets: Uint32Array;
  perCoupon: Uint32Array | undefined;
}

export class LoadGenerators {
  private constructor(private readonly procs: ChildProcess[]) {}

  static async start(count: number, execArgv: string[] = []): Promise<LoadGenerators> {
    const children = await Promise.all(Array.from({ length: count }, () => forkTs('bench/load-worker.ts', [], { execArgv })));
    return new LoadGenerators(children.map((c) => c.proc));
  }

  async run(spec: RunSpec, onProgress?: (p: Omit<LoadProgress, 'type'>) => void): Promise<LoadSummary> {
    const n = Math.min(this.procs.length, spec.concurrency);
    const latest: Omit<LoadProgress, 'type'>[] = Array.from({ length: n }, () => ({ completed: 0, deducted: 0, soldOut: 0, errors: 0 }));
    const results = await Promise.all(
      this.procs.slice(0, n).map(
        (proc, i) =>
          new Promise<LoadResult>((resolve, reject) => {
            const job: LoadJob = {
              ...spec,
              concurrency: Math.floor(spec.concurrency / n) + (i < spec.concurrency % n ? 1 : 0),
              idPrefix: `${spec.idPrefix}w${i}`,
              maxRequests: spec.maxRequests ? Math.ceil(spec.maxRequests / n) : Number.MAX_SAFE_INTEGER,
            };
            const onMsg = (msg: LoadProgress | LoadResult) => {
              if (msg.type === 'progress') {
                latest[i] = msg;
                // One generator saw the coupon sold out: the others stop sending too.
                if (spec.stopOnSoldOut && msg.soldOut > 0) for (const p of this.procs) p.send({ type: 'stop' });
                onProgress?.(
                  latest.reduce((a, b) => ({
                    completed: a.completed + b.completed,
                    deducted: a.deducted + b.deducted,
                    soldOut: a.soldOut + b.soldOut,
                    errors: a.errors + b.errors,
                  })),
                );
              } else if (msg.type === 'result') {
                proc.off('message', onMsg);
                proc.off('exit', onExit);
                resolve(msg);
              }
            };
            const onExit = (code: number | null) => reject(new Error(`load generator exited (${code}) during a run`));
            proc.on('message', onMsg);
            proc.once('exit', onExit);
            proc.send({ type: 'run', job });
          }),
      ),
    );
    return merge(results);
  }

  async close(): Promise<void> {
    await Promise.all(
      this.procs.map(
        (p) =>
          new Promise<void>((r) => {
            if (p.exitCode !== null) return r();
            p.once('exit', () => r());
            p.send({ type: 'exit' });
            setTimeout(() => p.kill('SIGKILL'), 5_000).unref();
          }),
      ),
    );
  }
}

function addCounts(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

function merge(results: LoadResult[]): LoadSummary {
  const hist = new Histogram();
  const outcomes: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const perSecond: number[] = [];
  let sent = 0;
  let completed = 0;
  let elapsedMs = 0;
  let cpu = 0;
  const successBuckets = new Uint32Array(Math.max(...results.map((r) => r.successBuckets.length)));
  let perCoupon: Uint32Array | undefined;
  for (const r of results) {
    hist.add(new Histogram(r.histogram));
    hist.maxUs = Math.max(hist.maxUs, r.maxUs);
    addCounts(outcomes, r.outcomes);
    addCounts(errors, r.errors);
    r.perSecond.forEach((v, i) => {
      perSecond[i] = (perSecond[i] ?? 0) + (v ?? 0);
    });
    r.successBuckets.forEach((v, i) => {
      successBuckets[i]! += v;
    });
    if (r.perCoupon) {
      perCoupon ??= new Uint32Array(r.perCoupon.length);
      r.perCoupon.forEach((v, i) => {
        perCoupon![i]! += v;
      });
    }
    sent += r.sent;
    completed += r.completed;
    elapsedMs = Math.max(elapsedMs, r.elapsedMs);
    cpu += r.cpuUserUs + r.cpuSystemUs;
  }
  const elapsedS = elapsedMs / 1000;
  const deducted = outcomes.DEDUCTED ?? 0;
  const errorCount = Object.values(errors).reduce((a, b) => a + b, 0);
  return {
    sent,
    completed,
    deducted,
    outcomes,
    errors,
    errorCount,
    firstError: results.find((r) => r.firstError)?.firstError,
    elapsedS,
    throughput: elapsedS > 0 ? completed / elapsedS : 0,
    deductRate: elapsedS > 0 ? deducted / elapsedS : 0,
    p50Ms: hist.quantileMs(0.5),
    p99Ms: hist.quantileMs(0.99),
    p999Ms: hist.quantileMs(0.999),
    maxMs: hist.maxUs / 1000,
    perSecond: Array.from(perSecond, (v) => v ?? 0),
    clientCpuUs: cpu,
    successBuckets,
    perCoupon,
  };
}
