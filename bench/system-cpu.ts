// CPU time of the whole machine and of the stack's processes (Redis nodes, MariaDB), from /proc, so a run can
// say how close to saturation the box was and where the cycles went.
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

const TICK_US = 10_000; // USER_HZ = 100 on Linux

export interface CpuSnapshot {
  atMs: number;
  machineBusyUs: number;
  machineTotalUs: number;
  procs: Map<number, number>;
}

function procCpuUs(pid: number): number {
  try {
    // Fields after the command name (which may contain spaces): utime is the 12th, stime the 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) * TICK_US;
  } catch {
    return 0;
  }
}

export function snapshot(pids: number[]): CpuSnapshot {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = line.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (line[3] ?? 0) + (line[4] ?? 0);
  return {
    atMs: Date.now(),
    machineBusyUs: (total - idle) * TICK_US,
    machineTotalUs: total * TICK_US,
    procs: new Map(pids.map((p) => [p, procCpuUs(p)])),
  };
}

/** Busy share of the whole machine (100% = every core busy) and CPU of the given processes in µs. */
export function delta(a: CpuSnapshot, b: CpuSnapshot): { machinePct: number; procUs: (pids: number[]) => number } {
  const total = b.machineTotalUs - a.machineTotalUs;
  return {
    machinePct: total > 0 ? ((b.machineBusyUs - a.machineBusyUs) / total) * 100 : 0,
    procUs: (pids) => pids.reduce((s, p) => s + (b.procs.get(p) ?? 0) - (a.procs.get(p) ?? 0), 0),
  };
}

export const coreCount = () => cpus().length;
