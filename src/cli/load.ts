// Runs `count` calls with at most `concurrency` in flight and summarises them: outcome counts, errors by
// gRPC status, rate and latency percentiles. The call itself is passed in, so the runner knows no RPC.
import { grpcCodeOf, STATUS_NAMES } from './errors.js';

export interface LoadSummary {
  count: number;
  completed: number;
  concurrency: number;
  elapsedMs: number;
  ratePerS: number;
  outcomes: Record<string, number>;
  errors: Record<string, number>;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** The first error of each kind, for the report. */
  firstErrors: Record<string, string>;
}

export interface LoadOptions {
  count: number;
  concurrency: number;
  signal: AbortSignal;
  /** Called after each finished call with the number finished so far. */
  onProgress?: (done: number) => void;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export async function runLoad(call: (i: number) => Promise<string>, o: LoadOptions): Promise<LoadSummary> {
  const outcomes: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const firstErrors: Record<string, string> = {};
  const latencies: number[] = [];
  let next = 0;
  let completed = 0;
  const started = performance.now();
  const worker = async () => {
    while (!o.signal.aborted) {
      const i = next++;
      if (i >= o.count) return;
      const t0 = performance.now();
      try {
        const outcome = await call(i);
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      } catch (err) {
        const code = grpcCodeOf(err);
        const name = code === undefined ? 'CLIENT_ERROR' : STATUS_NAMES[code]!;
        errors[name] = (errors[name] ?? 0) + 1;
        firstErrors[name] ??= String((err as { details?: string }).details ?? (err as Error).message);
      }
      latencies.push(performance.now() - t0);
      o.onProgress?.(++completed);
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, o.count) }, worker));
  const elapsedMs = performance.now() - started;
  latencies.sort((a, b) => a - b);
  const round = (v: number) => Math.round(v * 10) / 10;
  return {
    count: o.count,
    completed,
    concurrency: o.concurrency,
    elapsedMs: Math.round(elapsedMs),
    ratePerS: elapsedMs > 0 ? Math.round((completed / elapsedMs) * 1000) : 0,
    outcomes,
    errors,
    latencyMs: {
      p50: round(percentile(latencies, 50)),
      p90: round(percentile(latencies, 90)),
      p99: round(percentile(latencies, 99)),
      max: round(latencies.at(-1) ?? 0),
    },
    firstErrors,
  };
}
