// What the report is made of: one RunRecord per (scenario, design, concurrency), plus settlement figures.
import type { Scenario } from './options.js';

export interface CpuFigures {
  /** Server-under-test process, % of one core. */
  serverPct: number;
  serverUsPerReq: number;
  /** All load-generator processes, % of one core, and their cost per request. */
  clientPct: number;
  clientUsPerReq: number;
  /** All Redis nodes together / MariaDB, % of one core, and per call. Both servers are shared with whatever
   *  else runs on the box, so these include other users' work. */
  redisPct: number;
  redisUsPerReq: number;
  mysqlPct: number;
  mysqlUsPerReq: number;
  /** The whole machine, % of all cores. */
  machinePct: number;
}

export interface RunRecord {
  scenario: Scenario;
  design: string;
  concurrency: number;
  /** Units offered (sum over coupons). */
  stock: number;
  requests: number;
  deducted: number;
  outcomes: Record<string, number>;
  errors: Record<string, number>;
  errorCount: number;
  firstError?: string | undefined;
  elapsedS: number;
  /** Answered calls per second over the run. */
  throughput: number;
  deductRate: number;
  /** Best single second. */
  peakSecond: number;
  perSecond: number[];
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  /** Successes counted by the client beyond the stock (must be 0). */
  oversold: number;
  /** Units the design's own store says it handed out, and the difference to what the client saw. */
  storeSold: number;
  storeMinusClient: number;
  /** The run ended because the coupon was sold out (flash sale), not because of --max-run. */
  soldOut: boolean;
  cpu: CpuFigures;
  serverStats?: Record<string, number> | undefined;
  notes: string[];
}

export interface SettlementRecord {
  available: boolean;
  reason?: string | undefined;
  /** Backlog drained by relay + settle: events per second, batched as built and one event per transaction. */
  batched?: { events: number; seconds: number; eventsPerS: number; settleBatch: number } | undefined;
  single?: { events: number; seconds: number; eventsPerS: number; settleBatch: number } | undefined;
  /** Deduct -> settled lag during a flash sale with relay + settle running. */
  lag?: { units: number; p50Ms: number; p99Ms: number; maxMs: number; deductRate: number; settledAllAfterS: number } | undefined;
  /** Successes beyond the stock in the lag run's flash sale (must be 0). */
  oversold?: number | undefined;
  notes: string[];
}

/** One phase of the reserve-confirm scenario: a closed loop of typed clients for a fixed time. */
export interface HoldsRun {
  /** Operations attempted (a checkout is Reserve + Confirm: two calls). */
  ops: number;
  /** Operations that succeeded (deducted / confirmed / order deducted). */
  ok: number;
  errors: number;
  firstError?: string | undefined;
  elapsedS: number;
  /** Successful operations per second. */
  perS: number;
  p50Ms: number;
  p99Ms: number;
}

/** Reserve + Confirm (and DeductOrder of three coupons) against Deduct on the same server and client. */
export interface HoldsRecord {
  design: string;
  concurrency: number;
  seconds: number;
  deduct: HoldsRun;
  reserveConfirm: HoldsRun;
  deductOrder3: HoldsRun;
  /** reserveConfirm.perS / deduct.perS */
  ratio: number;
  /** deductOrder3.perS / deduct.perS */
  orderRatio: number;
  oversold: number;
  notes: string[];
}
