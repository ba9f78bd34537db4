import { Migration } from '@mikro-orm/migrations';

// Written by hand (not generated) so the schema reads as the contract it is; DB defaults stand in for
// onCreate hooks, which MikroORM 7 does not run for em.insert / qb.insert.
export class M001Initial extends Migration {
  override name = 'm001-initial';

  override up(): void {
    this.addSql(`create table coupon (
      id varchar(64) not null primary key,
      initial_stock bigint not null,
      total_stock bigint not null,
      shard_count int not null,
      per_user_limit int not null,
      shard_tags json not null,
      preheated tinyint(1) not null default 0,
      settled_remaining bigint not null,
      created_at datetime(3) not null default current_timestamp(3),
      updated_at datetime(3) not null default current_timestamp(3),
      version int not null default 1,
      constraint ck_coupon_remaining check (settled_remaining >= 0)
    ) engine=InnoDB default charset=utf8mb4`);
    this.addSql(`create table stock_ledger (
      id bigint not null auto_increment primary key,
      coupon_id varchar(64) not null,
      request_id varchar(128) not null,
      kind enum('DEDUCT','COMPENSATE','RESTOCK') not null,
      quantity bigint not null,
      user_id varchar(128) null,
      shard int null,
      reason varchar(256) null,
      occurred_at bigint not null,
      settled_at datetime(3) not null default current_timestamp(3),
      redis_applied tinyint(1) not null default 1,
      unique key uq_ledger_request (coupon_id, request_id, kind),
      key ix_ledger_coupon_kind (coupon_id, kind)
    ) engine=InnoDB default charset=utf8mb4`);
    this.addSql(`create table settlement_anomaly (
      id bigint not null auto_increment primary key,
      event_id varchar(255) not null,
      coupon_id varchar(64) null,
      request_id varchar(128) null,
      kind varchar(16) null,
      quantity bigint not null default 0,
      shard int null,
      reason varchar(64) not null,
      detail text not null,
      refunded tinyint(1) not null default 0,
      created_at datetime(3) not null default current_timestamp(3),
      unique key uq_anomaly_event (event_id),
      key ix_anomaly_coupon (coupon_id)
    ) engine=InnoDB default charset=utf8mb4`);
  }

  override down(): void {
    this.addSql('drop table if exists settlement_anomaly');
    this.addSql('drop table if exists stock_ledger');
    this.addSql('drop table if exists coupon');
  }
}
