// shardstock serve: runs one service instance in this process (the same entry as `npm run serve`).
import type { RunFn } from '../command.js';
import { noMorePositionals, parse, str } from '../options.js';

export const run: RunFn = async (argv) => {
  const p = parse(argv, { 'env-file': { type: 'string' } });
  noMorePositionals(p, 0);
  const envFile = str(p, 'env-file');
  if (envFile) process.loadEnvFile(envFile);
  // main.ts owns the process from here: signals, exit codes.
  await import('../../main.js');
  return new Promise<number>(() => {});
};
