// Which servers a benchmark invocation starts, and with what environment.
import type { BenchContext } from './context.js';
import type { AckLevel, DesignName, Scenario } from './options.js';

export interface DesignRun {
  label: string;
  design: DesignName;
  ackLevel?: AckLevel | undefined;
  /** MySQL-only and lock: capped stock so a full run stays within minutes. */
  slow: boolean;
  scenarios: Scenario[];
  /** Redis key prefix / SHARDSTOCK_NAMESPACE of this server (cleaned up afterwards). */
  namespace: string;
  host: HostName;
  /** Flash-sale in-flight levels this server runs. */
  concurrency: number[];
}

const LOAD_SCENARIOS: Scenario[] = ['flash-sale', 'many-coupons', 'sold-out-storm', 'reserve-confirm'];
/** Scenarios only the service itself serves (the baselines have no holds). */
const SERVICE_ONLY: Scenario[] = ['reserve-confirm'];

export function designRuns(ctx: Pick<BenchContext, 'opts' | 'runId'>): DesignRun[] {
  const { opts, runId } = ctx;
  const wanted = LOAD_SCENARIOS.filter((s) => opts.scenarios.includes(s));
  const runs: DesignRun[] = [];
  if (wanted.length === 0) return runs;
  for (const design of opts.designs) {
    if (design !== 'shardstock') {
      const own = wanted.filter((s) => !SERVICE_ONLY.includes(s));
      if (own.length === 0) continue;
      runs.push({
        label: design,
        design,
        slow: design === 'mysql' || design === 'lock',
        scenarios: own,
        namespace: `${runId}-${design}`,
        host: 'baselines',
        concurrency: opts.concurrency,
      });
      continue;
    }
    // The first ack level runs every scenario over the whole sweep; further levels (issue #7 compares them)
    // only the flash sale at the middle level of the sweep, which keeps a full run near ten minutes.
    const middle = opts.concurrency[Math.floor(opts.concurrency.length / 2)]!;
    opts.ackLevels.forEach((ack, i) => {
      const scenarios = i === 0 ? wanted : wanted.filter((s) => s === 'flash-sale');
      if (scenarios.length === 0) return;
      runs.push({
        label: ack === 'replica' ? 'shardstock' : `shardstock-${ack}`,
        design,
        ackLevel: ack,
        slow: false,
        scenarios,
        namespace: `${runId}s${ack[0]}`,
        host: i === 0 ? 'service' : 'service-2',
        concurrency: i === 0 ? opts.concurrency : [middle],
      });
    });
  }
  return runs;
}

export function serviceEnv(
  ctx: Pick<BenchContext, 'opts' | 'runId'>,
  namespace: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
    SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
    SHARDSTOCK_MYSQL_URL: ctx.opts.mysqlUrl,
    SHARDSTOCK_NAMESPACE: namespace,
    SHARDSTOCK_WORKERS: 'none',
    SHARDSTOCK_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    // Request records of a benchmark need not outlive it (the keys are deleted afterwards anyway).
    SHARDSTOCK_IDEMPOTENCY_WINDOW_S: '3600',
    SHARDSTOCK_INSTANCE_ID: `bench-${namespace}`,
    // The sweep keeps up to 1,024 calls in flight over 4 connections: lift the per-connection stream cap
    // (100 by default) so the figures stay comparable with runs made before the cap existed.
    SHARDSTOCK_MAX_STREAMS_PER_CONNECTION: '4096',
    ...extra,
  };
}

export interface ServerSpec {
  label: string;
  design: string;
  env: Record<string, string>;
}

/** Which process hosts a server: the headline service alone; other service instances together; the
 * baselines together (only one server is ever under load at a time, and module loading is most of a
 * start-up on a small box). */
export type HostName = 'service' | 'service-2' | 'baselines' | 'settlement';

export function serverSpec(ctx: Pick<BenchContext, 'opts' | 'runId'>, d: DesignRun): ServerSpec {
  if (d.design === 'shardstock')
    return { label: d.label, design: d.design, env: serviceEnv(ctx, d.namespace, { SHARDSTOCK_ACK_LEVEL: d.ackLevel ?? 'replica' }) };
  return {
    label: d.label,
    design: d.design,
    env: {
      SHARDSTOCK_MYSQL_URL: ctx.opts.mysqlUrl,
      SHARDSTOCK_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      SHARDSTOCK_MAX_STREAMS_PER_CONNECTION: '4096',
      BENCH_NAMESPACE: d.namespace,
    },
  };
}
