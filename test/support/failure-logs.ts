// Vitest setup file (both suites): a failed test prints the instance log lines kept since its file started
// (instance-logs.ts), so that a CI failure shows what the service said, not only what the test saw.
import { beforeAll, beforeEach } from 'vitest';
import { takeInstanceLogs } from './instance-logs.js';

beforeAll(() => {
  takeInstanceLogs();
});

beforeEach(({ onTestFailed, task }) => {
  onTestFailed(() => {
    const kept = takeInstanceLogs();
    if (kept.length === 0) return;
    process.stderr.write(
      `\n--- "${task.name}" failed; the last ${kept.length} warning(s) of this file's instances ---\n${kept.join('')}\n`,
    );
  });
});
