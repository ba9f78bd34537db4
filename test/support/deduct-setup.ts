// Stubs the Deduct test files share, in one place so that what they trust cannot drift apart from file to file.
import type { ServiceError } from '@grpc/grpc-js';
import type { ShardReloader } from '../../src/domain/shard-reloader.js';

/** For tests that create no missing shards: a reload would be a bug, so make it loud. */
export const noReload = {
  reload: async () => {
    throw new Error('unexpected reload');
  },
} as unknown as ShardReloader;

/** The error a call failed with, or null if it succeeded. */
export const errOf = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: ServiceError) => e,
  );
