// Where a command writes and what it may read: passed in, so commands never touch process globals directly.
export interface Out {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface Io {
  stdout: Out;
  stderr: Out;
  env: Record<string, string | undefined>;
  /** Aborted on Ctrl-C / SIGTERM: long-running commands (watch, load, serve) stop cleanly. */
  signal: AbortSignal;
}

export const println = (out: Out, line = '') => out.write(`${line}\n`);
