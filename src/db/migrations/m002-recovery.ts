import { Migration } from '@mikro-orm/migrations';

// A per-coupon recovery lease on the coupon row (MySQL, not Redis: the lease must outlive the very Redis data
// loss it guards), and REPAIR ledger rows recording what a recovery or repair changed in Redis.
export class M002Recovery extends Migration {
  override name = 'm002-recovery';

  override up(): void {
    this.addSql(`alter table coupon
      add column recovery_owner varchar(128) null,
      add column recovery_until bigint null,
      add column recovery_epoch int not null default 0`);
    this.addSql(`alter table stock_ledger modify kind enum('DEDUCT','COMPENSATE','RESTOCK','REPAIR') not null`);
    this.addSql('alter table stock_ledger add key ix_ledger_coupon_time (coupon_id, kind, occurred_at)');
  }

  override down(): void {
    this.addSql('alter table stock_ledger drop key ix_ledger_coupon_time');
    this.addSql(`delete from stock_ledger where kind = 'REPAIR'`);
    this.addSql(`alter table stock_ledger modify kind enum('DEDUCT','COMPENSATE','RESTOCK') not null`);
    this.addSql('alter table coupon drop column recovery_owner, drop column recovery_until, drop column recovery_epoch');
  }
}
