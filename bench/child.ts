// Forks a TypeScript child (through `node --import tsx`, the project's Node 24) with an IPC channel using
// advanced serialization, and waits for its first {type:'ready'} message.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface ForkOptions {
  env?: Record<string, string>;
  execArgv?: string[];
  readyTimeoutMs?: number;
  /** Where the child's stdout and stderr go: a file descriptor, or by default nowhere / inherited. */
  stdout?: number;
  stderr?: 'inherit' | 'ignore' | number;
}

export interface Child<Ready> {
  proc: ChildProcess;
  ready: Ready;
}

export async function forkTs<Ready = unknown>(script: string, args: string[], o: ForkOptions = {}): Promise<Child<Ready>> {
  const proc = fork(new URL(script, new URL('../', import.meta.url)).pathname, args, {
    cwd: ROOT,
    env: { ...process.env, ...o.env },
    execArgv: ['--import', 'tsx', ...(o.execArgv ?? [])],
    serialization: 'advanced',
    stdio: ['ignore', o.stdout ?? 'ignore', o.stderr ?? 'inherit', 'ipc'],
  });
  const ready = await new Promise<Ready>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${script} did not get ready within ${o.readyTimeoutMs ?? 60_000} ms`));
    }, o.readyTimeoutMs ?? 60_000);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}) before it was ready`));
    };
    proc.once('exit', onExit);
    proc.on('message', function first(msg: { type?: string; error?: string }) {
      if (msg.type === 'ready' || msg.type === 'failed') {
        clearTimeout(timer);
        proc.off('message', first);
        proc.off('exit', onExit);
        if (msg.type === 'failed') reject(new Error(`${script} failed to start: ${msg.error}`));
        else resolve(msg as Ready);
      }
    });
  });
  return { proc, ready };
}

/** Request/response over the IPC channel: each request carries an id, the child answers {id, ok, value|error}. */
export class IpcCaller {
  private seq = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  constructor(
    private readonly proc: ChildProcess,
    private readonly name: string,
  ) {
    proc.on('message', (msg: { id?: number; ok?: boolean; value?: unknown; error?: string }) => {
      if (typeof msg.id !== 'number') return;
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.value);
      else p.reject(new Error(`${this.name}: ${msg.error}`));
    });
    proc.once('exit', (code) => {
      for (const p of this.pending.values()) p.reject(new Error(`${this.name} exited (${code})`));
      this.pending.clear();
    });
  }

  call<T>(op: string, args: unknown = {}): Promise<T> {
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.proc.send({ id, op, args });
    });
  }
}

/** Child side of IpcCaller: serves `handlers[op](args)`. */
export function serveIpc(handlers: Record<string, (args: never) => Promise<unknown>>): void {
  process.on('message', (msg: { id?: number; op?: string; args?: unknown }) => {
    if (typeof msg.id !== 'number' || !msg.op) return;
    const h = handlers[msg.op];
    const reply = (m: object) => process.send?.({ id: msg.id, ...m });
    if (!h) return reply({ ok: false, error: `unknown op ${msg.op}` });
    h(msg.args as never).then(
      (value) => reply({ ok: true, value }),
      (err: Error) => reply({ ok: false, error: err?.stack ?? String(err) }),
    );
  });
}
