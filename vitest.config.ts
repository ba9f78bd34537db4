import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/failure-logs.ts'],
    // The suites share one Redis Cluster, NATS and MariaDB on a 2-core machine: run files one at a time so
    // concurrency tests measure the service, not each other.
    fileParallelism: false,
    pool: 'forks',
    // One fork serves the files in turn instead of a fresh one per file: each file builds its own app,
    // clients and keys, so nothing rides on a fresh module graph, and the ~75 re-imports were ~15% of the run.
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
