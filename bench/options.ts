// Command-line options of `npm run bench`: parsed once into a typed, validated plan; --help prints them all.
import { parseArgs } from 'node:util';

export const SCENARIOS = ['flash-sale', 'many-coupons', 'sold-out-storm', 'settlement', 'reserve-confirm'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export const DESIGNS = ['shardstock', 'noop', 'single-key', 'lock', 'mysql'] as const;
export type DesignName = (typeof DESIGNS)[number];

export type AckLevel = 'replica' | 'leader';

export interface BenchOptions {
  quick: boolean;
  scenarios: Scenario[];
  designs: DesignName[];
  /** In-flight requests per flash-sale run (the sweep). Other scenarios use `stormConcurrency`. */
  concurrency: number[];
  /** Units of the hot coupon for shardstock, no-op and single-key. */
  stock: number;
  /** Units for the slow designs (MySQL-only, lock), so a full run stays within minutes. */
  slowStock: number;
  shards: number;
  /** Longest a single run may last, seconds; a flash sale that has not sold out by then stops and says so. */
  maxRunS: number;
  /** The same for the slow designs (MySQL-only, lock). */
  slowMaxRunS: number;
  coupons: number;
  couponStock: number;
  /** Length of the many-coupons and sold-out-storm runs, seconds. */
  durationS: number;
  /** In-flight requests for the many-coupons, sold-out-storm and settlement runs. */
  stormConcurrency: number;
  settleEvents: number;
  ackLevels: AckLevel[];
  loadWorkers: number;
  connections: number;
  client: 'http2' | 'grpc-js';
  out: string;
  docs: boolean;
  profile: boolean;
  /** Node flags for the service's processes only (`--node-flags`), e.g. `--perf-basic-prof` for `perf`. */
  nodeFlags: string[];
  mysqlUrl: string;
  progress: boolean;
  /** Re-render the outputs from a saved report.json instead of running. */
  render: string | undefined;
}

export const HELP = `npm run bench -- [options]

Runs the shardstock service and four baselines (no-op, single Redis key + Lua, Redis lock, MySQL-only) on the
same grpc-js server stack and the local stack (Redis Cluster 7001-7006, NATS 4222, MariaDB 3306; brought up
when missing), then prints a table and writes JSON, Markdown and an SVG chart. Every run checks that no
design sold more units than it had (oversold must be 0).

Scenarios (--scenarios, comma-separated; default all):
  flash-sale      one hot coupon, ${'--shards'} shards, distinct users, quantity 1, a sweep of --concurrency;
                  each run goes until the coupon is sold out (or --max-run seconds)
  many-coupons    --coupons coupons, traffic spread round-robin over them, --duration seconds
  sold-out-storm  the coupon is exhausted first; then --duration seconds of traffic that must all be refused
  settlement      events/s through the real relay + settle pipeline into MySQL (batched vs one event per
                  transaction), and the lag deduct -> settled (p50/p99) during a flash sale
  reserve-confirm the service only: --duration seconds each of Deduct, Reserve + Confirm and DeductOrder of 3
                  coupons, same server and client; reported as ops/s and as ratios to Deduct

Designs (--designs, comma-separated; default all):
  shardstock  the service (src/app/app.ts startApp) in its own process, SHARDSTOCK_WORKERS=none
  noop        same gRPC server, Deduct answered from an in-memory counter: the ceiling of the RPC layer
  single-key  one Redis key per coupon, one check-and-decrement Lua script (bench/lua/)
  lock        SET lock NX PX, GET, check, DECRBY, owner-checked release (Redisson style)
  mysql       UPDATE ... SET remaining = remaining - ? WHERE id = ? AND remaining >= ? + ledger INSERT,
              one transaction per request

Options:
  --quick                 small sizes, finishes within about 60 s
  --scenarios LIST        see above
  --designs LIST          see above
  --concurrency LIST      flash-sale sweep of in-flight requests (default 64,256,1024; quick 256)
  --stock N               hot-coupon units for shardstock / noop / single-key (default 200000; quick 5000)
  --slow-stock N          hot-coupon units for mysql / lock (default 20000; quick 500)
  --shards N              shards of the hot coupon (default 16)
  --max-run S             longest single run in seconds (default 60; quick 5)
  --slow-max-run S        the same for mysql / lock (default 15; quick 3)
  --coupons N             coupons in many-coupons (default 10000; quick 200)
  --coupon-stock N        units per coupon in many-coupons (default 100)
  --duration S            seconds of many-coupons and sold-out-storm (default 10; quick 1)
  --storm-concurrency N   in-flight requests for many-coupons / sold-out-storm / settlement (default 256)
  --settle-events N       events in the settlement backlog runs (default 50000; quick 2000)
  --ack-level LIST        replica, leader or both (default both): the first level runs every scenario, the
                          next the flash sale at the middle level of the sweep
  --load-workers N        load-generator processes (default 1)
  --connections N         HTTP/2 connections per load-generator process (default 4)
  --client KIND           http2 (raw HTTP/2 gRPC framing, default) or grpc-js (makeUnaryRequest)
  --out DIR               where report.json, report.md, chart.svg and the servers' logs go (default bench/out)
  --docs | --no-docs      also write docs/benchmark.md and docs/benchmark.svg (default: on for full runs)
  --profile               run every server process (the service's and the baselines') with --cpu-prof (<out>/profiles)
  --node-flags=F          extra node flags for the service's processes only, space-separated (quoted): e.g.
                          --node-flags=--perf-basic-prof for perf, --node-flags="--max-semi-space-size=64 ..."
  --mysql-url URL         database for the service and the MySQL baseline
                          (default mysql://root@127.0.0.1:3306/shardstock_bench; recreated each run)
  --no-progress           no progress bar
  --render FILE           write report.md / chart.svg (and the docs with --docs) again from a saved
                          report.json, without running anything
  -h, --help              this text

Targets (reported as PASS/MISS, never asserted; issue #14, all at 256 in flight in the same run): flash sale
>= 1.0x single-key and >= 0.6x no-op; p99 <= 1.5x no-op's p99; Redis CPU <= 30 us per deduction (all nodes);
many coupons >= 0.8x the flash-sale rate; sold-out storm >= 1.0x single-key's flash-sale rate; settlement
>= 15,000 events/s; settlement lag p99 <= 0.5 s; 0 oversold. Also >= 4x MySQL-only and >= 10x lock (best of sweep).
`;

export class UsageError extends Error {
  override name = 'UsageError';
}

function list<T extends string>(raw: string, known: readonly T[], what: string): T[] {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const i of items)
    if (!(known as readonly string[]).includes(i))
      throw new UsageError(`unknown ${what} ${JSON.stringify(i)} (known: ${known.join(', ')})`);
  if (items.length === 0) throw new UsageError(`at least one ${what} is needed`);
  return [...new Set(items)] as T[];
}

function positive(name: string, raw: string | undefined, def: number, max = 1e9): number {
  if (raw === undefined) return def;
  const v = Number(raw);
  if (!Number.isFinite(v) || v <= 0 || v > max)
    throw new UsageError(`--${name} must be a number in (0, ${max}], got ${JSON.stringify(raw)}`);
  return v;
}

const int = (name: string, raw: string | undefined, def: number, max = 1e9) => {
  const v = positive(name, raw, def, max);
  if (!Number.isInteger(v)) throw new UsageError(`--${name} must be an integer, got ${JSON.stringify(raw)}`);
  return v;
};

/** Returns undefined when --help was asked for. */
export function parseOptions(argv: string[]): BenchOptions | undefined {
  const { values: v } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    allowNegative: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      quick: { type: 'boolean' },
      scenarios: { type: 'string' },
      designs: { type: 'string' },
      concurrency: { type: 'string' },
      stock: { type: 'string' },
      'slow-stock': { type: 'string' },
      shards: { type: 'string' },
      'max-run': { type: 'string' },
      'slow-max-run': { type: 'string' },
      coupons: { type: 'string' },
      'coupon-stock': { type: 'string' },
      duration: { type: 'string' },
      'storm-concurrency': { type: 'string' },
      'settle-events': { type: 'string' },
      'ack-level': { type: 'string' },
      'load-workers': { type: 'string' },
      connections: { type: 'string' },
      client: { type: 'string' },
      out: { type: 'string' },
      docs: { type: 'boolean' },
      profile: { type: 'boolean' },
      'node-flags': { type: 'string' },
      'mysql-url': { type: 'string' },
      progress: { type: 'boolean' },
      render: { type: 'string' },
    },
  });
  if (v.help) return undefined;
  const quick = v.quick === true;
  const concurrency = (v.concurrency ?? (quick ? '256' : '64,256,1024')).split(',').map((s) => int('concurrency', s.trim(), 1, 100_000));
  const ackRaw = v['ack-level'] === 'both' ? 'replica,leader' : (v['ack-level'] ?? 'replica,leader');
  const client = v.client ?? 'http2';
  if (client !== 'http2' && client !== 'grpc-js') throw new UsageError(`--client must be http2 or grpc-js, got ${JSON.stringify(client)}`);
  return {
    quick,
    scenarios: list(v.scenarios ?? SCENARIOS.join(','), SCENARIOS, 'scenario'),
    designs: list(v.designs ?? DESIGNS.join(','), DESIGNS, 'design'),
    concurrency: [...new Set(concurrency)].sort((a, b) => a - b),
    stock: int('stock', v.stock, quick ? 5_000 : 200_000),
    slowStock: int('slow-stock', v['slow-stock'], quick ? 500 : 20_000),
    shards: int('shards', v.shards, 16, 1024),
    maxRunS: positive('max-run', v['max-run'], quick ? 5 : 60, 3600),
    slowMaxRunS: positive('slow-max-run', v['slow-max-run'], quick ? 3 : 15, 3600),
    coupons: int('coupons', v.coupons, quick ? 200 : 10_000, 1_000_000),
    couponStock: int('coupon-stock', v['coupon-stock'], 100),
    durationS: positive('duration', v.duration, quick ? 1 : 10, 3600),
    stormConcurrency: int('storm-concurrency', v['storm-concurrency'], 256, 100_000),
    settleEvents: int('settle-events', v['settle-events'], quick ? 2_000 : 50_000),
    ackLevels: list(ackRaw, ['replica', 'leader'] as const, 'ack-level'),
    loadWorkers: int('load-workers', v['load-workers'], 1, 64),
    connections: int('connections', v.connections, 4, 256),
    client,
    out: v.out ?? 'bench/out',
    docs: v.docs ?? !quick,
    profile: v.profile === true,
    nodeFlags: (v['node-flags'] ?? '').split(' ').filter(Boolean),
    mysqlUrl: v['mysql-url'] ?? 'mysql://root@127.0.0.1:3306/shardstock_bench',
    progress: v.progress ?? true,
    render: v.render,
  };
}
