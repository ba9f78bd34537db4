// What every scenario gets: the options, the load generators, the stack's pids, the progress line and the
// list of records the report is built from.
import type { LoadGenerators } from './load.js';
import type { BenchOptions } from './options.js';
import type { Progress } from './progress.js';
import type { HoldsRecord, RunRecord, SettlementRecord } from './records.js';
import type { StackPids } from './stack-info.js';

export interface BenchContext {
  opts: BenchOptions;
  /** Prefix of every coupon, request and namespace of this invocation. */
  runId: string;
  load: LoadGenerators;
  pids: StackPids;
  progress: Progress;
  runs: RunRecord[];
  settlement?: SettlementRecord;
  /** The reserve-confirm scenario (holds and orders against Deduct). */
  holds?: HoldsRecord;
  /** Printed as each run finishes (console table row). */
  onRun(r: RunRecord): void;
}

/** Deadline for one call: generous, since a 2-core box under 1,024 in flight queues a lot. */
export const CALL_TIMEOUT_MS = 30_000;
