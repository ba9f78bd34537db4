// Runs test helpers as separate OS processes through the project's Node 24 (tsx), collecting their output.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** `node --import tsx`, not the tsx CLI: the CLI runs the script in a grandchild process, which a SIGKILL
 * of the child would leave running. */
export function spawnTs(script: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function runTs<T>(script: string, args: string[], env: Record<string, string> = {}): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawnTs(script, args, env);
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (err += d));
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`${script} exited ${code}: ${err}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as T);
      } catch {
        reject(new Error(`${script} printed no JSON: ${out} ${err}`));
      }
    });
  });
}
