// `npm test`: installs the Debian packages every suite needs (`npm run stack -- setup`), then runs the main
// suites and then the fault-injection suite — the second runs even when the first fails, and the exit code is
// non-zero if either failed (a `&&` chain would hide the fault suite behind any failure). The set-up is done
// before any test file starts, so no test's time ever includes an install.
import { spawnSync } from 'node:child_process';

const setup = spawnSync('tsx', ['deploy/local/stack.ts', 'setup'], { stdio: 'inherit' });
if (setup.status !== 0) {
  console.error('npm test: the set-up step (npm run stack -- setup) failed; no suite was run');
  process.exit(1);
}

const suites = [
  ['vitest', ['run']],
  ['vitest', ['run', '--config', 'vitest.faults.config.ts']],
];
let failed = 0;
for (const [cmd, args] of suites) {
  const r = spawnSync(cmd, [...args, ...process.argv.slice(2)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
