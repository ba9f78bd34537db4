// `npm test`: the main suites, then the fault-injection suite — the second runs even when the first fails,
// and the exit code is non-zero if either failed (a `&&` chain would hide the fault suite behind any failure).
import { spawnSync } from 'node:child_process';

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
