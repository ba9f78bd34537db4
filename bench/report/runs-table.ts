// The columns every run is shown with, in the console and in Markdown.
import type { RunRecord } from '../records.js';
import { int, ms, pct } from './format.js';

export const RUN_HEAD = [
  'scenario',
  'design',
  'in flight',
  'calls/s',
  'deducts/s',
  'best 1 s',
  'p50 ms',
  'p99 ms',
  'p99.9 ms',
  'errors',
  'oversold',
  'server CPU',
  'server µs/call',
  'redis µs/call',
  'mysql µs/call',
  'client µs/call',
  'machine',
];
export const RUN_RIGHT = RUN_HEAD.map((_, i) => i >= 2);

export function runRow(r: RunRecord): string[] {
  return [
    r.scenario,
    r.design,
    String(r.concurrency),
    int(r.throughput),
    int(r.deductRate),
    int(r.peakSecond),
    ms(r.p50Ms),
    ms(r.p99Ms),
    ms(r.p999Ms),
    String(r.errorCount),
    String(r.oversold),
    pct(r.cpu.serverPct),
    int(r.cpu.serverUsPerReq),
    int(r.cpu.redisUsPerReq),
    int(r.cpu.mysqlUsPerReq),
    int(r.cpu.clientUsPerReq),
    pct(r.cpu.machinePct),
  ];
}
