// Opens MikroORM on the configured MySQL/MariaDB, creating the database if needed and running the
// committed migrations, so a fresh server is usable with no manual step.
import { MikroORM } from '@mikro-orm/mysql';
import { createConnection } from 'mysql2/promise';
import { Migrator } from '@mikro-orm/migrations';
import { entities } from './entities.js';
import { M001Initial } from './migrations/m001-initial.js';
import { M002Recovery } from './migrations/m002-recovery.js';
import { M003CouponCreatedIndex } from './migrations/m003-coupon-created-index.js';
import { M004Sale } from './migrations/m004-sale.js';
import { M005AnomalyUser } from './migrations/m005-anomaly-user.js';
import { M006BinaryIds } from './migrations/m006-binary-ids.js';

export interface OrmOptions {
  url: string;
  /** Extra pool size; settlement and admin share it. */
  poolMax?: number;
  debug?: boolean;
  /** TLS to the server (PEM contents), verifying its certificate; undefined = plaintext. */
  tls?: { ca?: Buffer | undefined; cert?: Buffer | undefined; key?: Buffer | undefined } | undefined;
}

export async function openOrm(options: OrmOptions): Promise<MikroORM> {
  const url = new URL(options.url);
  const dbName = decodeURIComponent(url.pathname.replace(/^\//, '')) || 'shardstock';
  if (!/^[A-Za-z0-9_]{1,64}$/.test(dbName)) throw new Error(`database name ${JSON.stringify(dbName)} is not allowed`);
  // MikroORM's ensureDatabase also creates the schema from entities, which would bypass the migrations.
  const ssl = options.tls ? { ...options.tls, rejectUnauthorized: true } : undefined;
  const admin = await createConnection({
    host: url.hostname,
    port: Number(url.port || 3306),
    user: decodeURIComponent(url.username || 'root'),
    password: decodeURIComponent(url.password),
    ssl,
  });
  let orm: MikroORM | undefined;
  try {
    await admin.query(`create database if not exists \`${dbName}\` character set utf8mb4`);
    orm = await initOrm(url, dbName, options, ssl);
    // MariaDB/MySQL DDL is not transactional and MikroORM does not lock: instances starting together would run
    // the same migration twice. A named lock held on this connection makes them take turns.
    const [rows] = await admin.query('select get_lock(?, 120) as got', [`shardstock:migrations:${dbName}`]);
    if ((rows as { got: number | null }[])[0]?.got !== 1)
      throw new Error('timed out waiting for another instance to finish the migrations');
    await orm.migrator.up();
    return orm;
  } catch (err) {
    await orm?.close();
    throw err;
  } finally {
    await admin.end();
  }
}

function initOrm(url: URL, dbName: string, options: OrmOptions, ssl: object | undefined): Promise<MikroORM> {
  return MikroORM.init({
    clientUrl: `${url.protocol}//${url.username ? `${url.username}${url.password ? `:${url.password}` : ''}@` : ''}${url.host}/${dbName}`,
    entities,
    extensions: [Migrator],
    migrations: {
      migrationsList: [
        { name: 'm001-initial', class: M001Initial },
        { name: 'm002-recovery', class: M002Recovery },
        { name: 'm003-coupon-created-index', class: M003CouponCreatedIndex },
        { name: 'm004-sale', class: M004Sale },
        { name: 'm005-anomaly-user', class: M005AnomalyUser },
        { name: 'm006-binary-ids', class: M006BinaryIds },
      ],
      transactional: false,
      snapshot: false,
      silent: true,
    },
    pool: { min: 1, max: options.poolMax ?? 16 },
    debug: options.debug ?? false,
    ...(ssl ? { driverOptions: { ssl } } : {}),
    ensureDatabase: false,
    allowGlobalContext: false,
  });
}
