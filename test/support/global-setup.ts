// Before any test file: the Debian packages the suites use (a no-op when all are there; `npm test` has already
// run it once), then the local stack (Redis Cluster on 7001-7006, NATS, MariaDB), reused or started from its
// kept data. Vitest runs this to the end before the first file, outside every test's timeout.
import { stackSetup, stackUp } from '../../deploy/local/stack.js';

export default async function setup(): Promise<void> {
  await stackSetup();
  await stackUp();
}
