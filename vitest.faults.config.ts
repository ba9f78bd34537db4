import { defineConfig } from 'vitest/config';

// `npm run test:faults`: fault injection against a private Redis Cluster (ports 7101-7106, data under
// .data/faults) and service instances started by the tests; NATS and MariaDB come from the shared stack,
// which these tests never stop.
export default defineConfig({
  test: {
    include: ['test-faults/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/failure-logs.ts'],
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 90_000,
    reporters: ['default'],
  },
});
