// `npm test`: installs the Debian packages every suite needs (`npm run stack -- setup`), then runs the main
// suites and then the fault-injection suite — the second runs even when the first fails, and the exit code is
// non-zero if either failed (a `&&` chain would hide the fault suite behind any failure). The set-up is done
// before any test file starts, so no test's time ever includes an install.
//
// The run ends with a list of every failed test and its first error lines: a CI log is often read from its
// tail, and a failure in the main suite would otherwise sit some thousand lines above the fault suite's output.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const setup = spawnSync('tsx', ['deploy/local/stack.ts', 'setup'], { stdio: 'inherit' });
if (setup.status !== 0) {
  console.error('npm test: the set-up step (npm run stack -- setup) failed; no suite was run');
  process.exit(1);
}

const reports = mkdtempSync(join(tmpdir(), 'shardstock-test-'));
const suites = [
  ['main', ['run']],
  ['faults', ['run', '--config', 'vitest.faults.config.ts']],
];
const summary = [];
let failed = 0;
for (const [name, args] of suites) {
  const report = join(reports, `${name}.json`);
  const reporterArgs = ['--reporter=default', '--reporter=json', `--outputFile.json=${report}`];
  const r = spawnSync('vitest', [...args, ...reporterArgs, ...process.argv.slice(2)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
  summary.push(...describe(name, r.status, report));
}
rmSync(reports, { recursive: true, force: true });
console.log(`\nnpm test: ${summary.join('\n')}`);
process.exit(failed === 0 ? 0 : 1);

function describe(name, status, report) {
  const here = `${process.cwd()}/`;
  let json;
  try {
    json = JSON.parse(readFileSync(report, 'utf8'));
  } catch {
    return [`${name} suite exited ${status} and wrote no report`];
  }
  const lines = [
    `${name} suite exited ${status}: ${json.numPassedTests}/${json.numTotalTests} tests passed, ${json.numFailedTests} failed`,
  ];
  for (const file of json.testResults ?? []) {
    const failures = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
    if (failures.length === 0 && file.status === 'failed') {
      lines.push(`  FAIL ${file.name.replace(here, '')}: ${firstLines(file.message)}`);
    }
    for (const t of failures) {
      lines.push(`  FAIL ${file.name.replace(here, '')} > ${t.fullName}`, `       ${firstLines(t.failureMessages?.[0])}`);
    }
  }
  return lines;
}

function firstLines(text) {
  return String(text ?? '')
    .split('\n')
    .slice(0, 6)
    .join('\n       ');
}
