import { Migration } from '@mikro-orm/migrations';

// Ids compare byte for byte, as Redis keys, request records and NATS subjects do. Under the server's default
// collation (utf8mb4_general_ci) "R-1" and "r-1" were one key: the ledger's unique key took a second request
// id differing only in case for a repeat of the first (a Restock answered `replayed` without adding its units,
// a Deduct sold in Redis and never counted in MySQL), and a coupon id found another coupon's row. Rebuilds
// stock_ledger (a copy of the table): run it between sales on a large ledger.
export class M006BinaryIds extends Migration {
  override name = 'm006-binary-ids';

  override up(): void {
    this.addSql('alter table coupon modify id varchar(64) character set utf8mb4 collate utf8mb4_bin not null');
    this.addSql(`alter table stock_ledger
      modify coupon_id varchar(64) character set utf8mb4 collate utf8mb4_bin not null,
      modify request_id varchar(128) character set utf8mb4 collate utf8mb4_bin not null,
      modify user_id varchar(128) character set utf8mb4 collate utf8mb4_bin null`);
    this.addSql(`alter table settlement_anomaly
      modify event_id varchar(255) character set utf8mb4 collate utf8mb4_bin not null,
      modify coupon_id varchar(64) character set utf8mb4 collate utf8mb4_bin null,
      modify request_id varchar(128) character set utf8mb4 collate utf8mb4_bin null,
      modify user_id varchar(128) character set utf8mb4 collate utf8mb4_bin null`);
  }

  override down(): void {
    // Fails on a unique key if ids differing only in case were stored meanwhile.
    this.addSql('alter table coupon modify id varchar(64) character set utf8mb4 collate utf8mb4_general_ci not null');
    this.addSql(`alter table stock_ledger
      modify coupon_id varchar(64) character set utf8mb4 collate utf8mb4_general_ci not null,
      modify request_id varchar(128) character set utf8mb4 collate utf8mb4_general_ci not null,
      modify user_id varchar(128) character set utf8mb4 collate utf8mb4_general_ci null`);
    this.addSql(`alter table settlement_anomaly
      modify event_id varchar(255) character set utf8mb4 collate utf8mb4_general_ci not null,
      modify coupon_id varchar(64) character set utf8mb4 collate utf8mb4_general_ci null,
      modify request_id varchar(128) character set utf8mb4 collate utf8mb4_general_ci null,
      modify user_id varchar(128) character set utf8mb4 collate utf8mb4_general_ci null`);
  }
}
