// Baseline "MySQL only": per Deduct one transaction with a conditional UPDATE of the coupon row and a ledger
// INSERT — the classic design. Its own two tables in the benchmark database.
import { createPool, type Pool, type ResultSetHeader, type RowDataPacket } from 'mysql2/promise';
import { DomainError } from '../../src/domain/errors.js';
import type { BaselineStore } from './store.js';

const POOL_SIZE = 32;

const SCHEMA = [
  `create table if not exists bench_coupon (
     id varchar(64) not null primary key,
     total bigint not null,
     remaining bigint not null
   ) engine=InnoDB`,
  `create table if not exists bench_ledger (
     id bigint not null auto_increment primary key,
     coupon_id varchar(64) not null,
     request_id varchar(128) not null,
     user_id varchar(128) not null,
     quantity int not null,
     created_at timestamp(3) not null default current_timestamp(3),
     unique key bench_ledger_request (coupon_id, request_id)
   ) engine=InnoDB`,
];

export async function mysqlOnlyStore(url: string): Promise<BaselineStore> {
  const pool: Pool = createPool({ uri: url, connectionLimit: POOL_SIZE, waitForConnections: true, queueLimit: 0 });
  for (const ddl of SCHEMA) await pool.query(ddl);

  return {
    async deduct({ couponId, requestId, userId, quantity }) {
      const conn = await pool.getConnection();
      try {
        await conn.beginTransaction();
        const [upd] = await conn.execute<ResultSetHeader>(
          'update bench_coupon set remaining = remaining - ? where id = ? and remaining >= ?',
          [quantity, couponId, quantity],
        );
        if (upd.affectedRows === 1) {
          await conn.execute('insert into bench_ledger (coupon_id, request_id, user_id, quantity) values (?, ?, ?, ?)', [
            couponId,
            requestId,
            userId,
            quantity,
          ]);
          await conn.commit();
          return { outcome: 'deducted', remaining: 0 }; // not read back: one round trip fewer, as usually done
        }
        await conn.rollback();
        if (quantity === 1) return { outcome: 'sold_out', remaining: 0 };
        const [rows] = await conn.execute<RowDataPacket[]>('select remaining from bench_coupon where id = ?', [couponId]);
        if (rows.length === 0) throw new DomainError('not_found', `coupon ${couponId} does not exist`);
        const remaining = Number(rows[0]!.remaining);
        return { outcome: remaining === 0 ? 'sold_out' : 'insufficient', remaining };
      } catch (err) {
        await conn.rollback().catch(() => {});
        throw err;
      } finally {
        conn.release();
      }
    },
    async create(list) {
      for (let i = 0; i < list.length; i += 1000) {
        const rows = list.slice(i, i + 1000).map((c) => [c.id, c.stock, c.stock]);
        await pool.query('insert into bench_coupon (id, total, remaining) values ?', [rows]);
      }
    },
    async levels(ids) {
      const out: { id: string; stock: number; remaining: number }[] = [];
      for (let i = 0; i < ids.length; i += 1000) {
        const [rows] = await pool.query<RowDataPacket[]>('select id, total, remaining from bench_coupon where id in (?)', [
          ids.slice(i, i + 1000),
        ]);
        for (const r of rows) out.push({ id: String(r.id), stock: Number(r.total), remaining: Number(r.remaining) });
      }
      return out;
    },
    async close() {
      await pool.end();
    },
  };
}
