// Server processes (bench/server-child.ts) and the servers under test they host, driven over IPC.
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { forkTs, IpcCaller } from './child.js';
import type { CouponLevel, CouponSpec, CpuSample } from './design.js';

export interface ServerHandle {
  /** Label in the report: shardstock, shardstock-leader, noop, single-key, lock, mysql, settle-*. */
  label: string;
  addr: string;
  /** The hosting process: its CPU is what `cpu()` reports. */
  pid: number;
  create(coupons: CouponSpec[]): Promise<void>;
  levels(ids: string[]): Promise<CouponLevel[]>;
  cpu(): Promise<CpuSample>;
  stats(): Promise<Record<string, number>>;
  /** Stops this server (idempotent); the process stays for the others. */
  stop(): Promise<void>;
}

export class ServerHost {
  private constructor(
    readonly name: string,
    private readonly proc: ChildProcess,
    private readonly ipc: IpcCaller,
    readonly pid: number,
  ) {}

  /** `logFile`: where the servers' logs (pino on stdout, at SHARDSTOCK_LOG_LEVEL) and stderr go. */
  static async start(name: string, execArgv: string[] = [], logFile?: string): Promise<ServerHost> {
    const fd = logFile ? openSync(logFile, 'w') : undefined;
    const { proc, ready } = await forkTs<{ pid: number }>('bench/server-child.ts', [], {
      execArgv,
      readyTimeoutMs: 90_000,
      stdout: fd,
      stderr: fd,
    });
    if (fd !== undefined) closeSync(fd);
    return new ServerHost(name, proc, new IpcCaller(proc, `server process ${name}`), ready.pid);
  }

  /** Imports the modules these designs need (module loading is most of a start-up). */
  preload(designs: string[]): Promise<void> {
    return this.ipc.call('preload', { designs });
  }

  async add(label: string, design: string, env: Record<string, string>): Promise<ServerHandle> {
    const { port } = await this.ipc.call<{ port: number }>('start', { label, design, env });
    let stopped: Promise<void> | undefined;
    return {
      label,
      addr: `127.0.0.1:${port}`,
      pid: this.pid,
      create: (coupons) => this.ipc.call('create', { label, coupons }),
      levels: (ids) => this.ipc.call('levels', { label, ids }),
      cpu: () => this.ipc.call('cpu'),
      stats: () => this.ipc.call('stats', { label }),
      stop: () => (stopped ??= this.alive() ? this.ipc.call<void>('stop', { label }).catch(() => {}) : Promise.resolve()),
    };
  }

  private alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null && this.proc.connected;
  }

  /** Stops every server it still hosts and ends the process. */
  async close(): Promise<void> {
    if (!this.alive()) return;
    const exited = new Promise<void>((r) => this.proc.once('exit', () => r()));
    await this.ipc.call('exit').catch(() => {});
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(t);
  }
}
