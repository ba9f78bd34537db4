// Before any test file: the Debian packages the suites use (a no-op when all are there; `npm test` has already
// run it once), then the local stack (Redis Cluster on 7001-7006, NATS, MariaDB), reused or started from its
// kept data, then an empty test database. Vitest runs this to the end before the first file, outside every
// test's timeout.
//
// The test database starts empty each run: every test makes its own coupons, so nothing depends on an earlier
// run's rows, but the workers of every app a test starts walk all of the database's coupons, and a database
// kept across runs made each run slower than the one before it (a ledger of ~250,000 rows after four runs).
import { createConnection } from 'mysql2/promise';
import { stackSetup, stackUp } from '../../deploy/local/stack.js';
import { openOrm } from '../../src/db/orm.js';

const TEST_DB = 'shardstock_test';

export default async function setup(): Promise<void> {
  await stackSetup();
  await stackUp();
  const admin = await createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  try {
    await admin.query(`drop database if exists \`${TEST_DB}\``);
  } finally {
    await admin.end();
  }
  // Created and migrated once here, not by the first apps of the run racing for it.
  const orm = await openOrm({ url: `mysql://root@127.0.0.1:3306/${TEST_DB}` });
  await orm.close();
}
