// Starts a server under test (bench/server-child.ts) and talks to it over IPC.
import { forkTs, IpcCaller } from './child.js';
import type { CouponLevel, CouponSpec, CpuSample, ServerReady } from './design.js';

export interface ServerHandle {
  /** Label in the report: shardstock, shardstock-leader, noop, single-key, lock, mysql. */
  label: string;
  addr: string;
  pid: number;
  create(coupons: CouponSpec[]): Promise<void>;
  levels(ids: string[]): Promise<CouponLevel[]>;
  cpu(): Promise<CpuSample>;
  stats(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

export async function startServer(label: string, design: string, env: Record<string, string>, execArgv: string[] = []): Promise<ServerHandle> {
  const { proc, ready } = await forkTs<ServerReady>('bench/server-child.ts', [design], { env, execArgv, readyTimeoutMs: 90_000 });
  const ipc = new IpcCaller(proc, `${label} server`);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  return {
    label,
    addr: `127.0.0.1:${ready.port}`,
    pid: ready.pid,
    create: (coupons) => ipc.call('create', { coupons }),
    levels: (ids) => ipc.call('levels', { ids }),
    cpu: () => ipc.call('cpu'),
    stats: () => ipc.call('stats'),
    async stop() {
      if (proc.exitCode !== null) return;
      await ipc.call('stop').catch(() => {});
      const t = setTimeout(() => proc.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(t);
    },
  };
}
