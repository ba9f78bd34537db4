// Instances starting together on an empty database take turns at the migrations (a named lock in openOrm):
// MariaDB/MySQL DDL is not transactional, so two running the same ALTER at once would fail one of them.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openOrm } from '../src/db/orm.js';
import { TEST_DB_URL } from './support/harness.js';

describe('migrations', () => {
  it('when four instances open an empty database at once, then all start and each migration ran once', async () => {
    const db = `shardstock_mig_${randomBytes(4).toString('hex')}`;
    const url = TEST_DB_URL.replace(/\/[^/]*$/, `/${db}`);
    const orms = await Promise.all(Array.from({ length: 4 }, () => openOrm({ url, poolMax: 2 })));
    try {
      const ran = await orms[0]!.em.fork().execute<{ name: string }[]>('select name from mikro_orm_migrations order by id');
      const names = ran.map((r) => r.name);
      expect(new Set(names).size).toBe(names.length);
      expect(names).toEqual([
        'm001-initial',
        'm002-recovery',
        'm003-coupon-created-index',
        'm004-sale',
        'm005-anomaly-user',
        'm006-binary-ids',
      ]);
    } finally {
      await orms[0]!.em.fork().execute(`drop database \`${db}\``);
      await Promise.all(orms.map((o) => o.close()));
    }
  });
});
