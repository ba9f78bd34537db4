// The CLI as an operator runs it (bin/shardstock.mjs in a child process), for the CLI test files that had the same
// runner word for word.
import { execFile } from 'node:child_process';
import { expect } from 'vitest';

const LAUNCHER = new URL('../../bin/shardstock.mjs', import.meta.url).pathname;

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** bin/shardstock.mjs in a child process against the instance at `grpcAddr`, as an operator runs it. */
export function runCli(grpcAddr: string, args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [LAUNCHER, ...args],
      { env: { ...process.env, SHARDSTOCK_GRPC_ADDR: grpcAddr }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** The one JSON object a --json command printed; any other output fails the test, showing both streams. */
export function onlyJson<T>(r: CliRun): T {
  const lines = r.stdout.trim().split('\n');
  expect(lines, `stdout: ${r.stdout}\nstderr: ${r.stderr}`).toHaveLength(1);
  return JSON.parse(lines[0]!) as T;
}
