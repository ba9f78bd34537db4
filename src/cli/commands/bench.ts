// shardstock bench: the benchmark (bench/run.ts, `npm run bench`) with its arguments passed through.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { RunFn } from '../command.js';
import { BENCH_HELP as HELP } from '../help.js';
import { CliError } from '../errors.js';
import { projectRoot } from '../project-root.js';

export const run: RunFn = async (argv, io) => {
  if (argv.includes('--help') || argv.includes('-h')) io.stdout.write(`${HELP}\n\n--- the benchmark's own help ---\n`);
  const root = projectRoot();
  const script = join(root, 'bench', 'run.ts');
  if (!existsSync(script)) throw new CliError(`the benchmark is not in this checkout (${script} is missing)`);
  let tsx: string;
  try {
    tsx = import.meta.resolve('tsx');
  } catch {
    throw new CliError('bench needs a development checkout with its devDependencies (npm install): tsx is missing');
  }
  const child = spawn(process.execPath, ['--import', tsx, script, ...argv], { cwd: root, stdio: 'inherit', env: process.env });
  const forward = () => child.kill('SIGTERM');
  io.signal.addEventListener('abort', forward, { once: true });
  return new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      io.signal.removeEventListener('abort', forward);
      resolve(code ?? (signal ? 128 + 15 : 1));
    });
  });
};
