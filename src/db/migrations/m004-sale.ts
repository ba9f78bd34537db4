import { Migration } from '@mikro-orm/migrations';

// Sale windows and the kill switch on the coupon row (read into each instance's coupon catalog, never on the
// Deduct hot path), a revision so instances apply changes in order, and ledger kinds auditing each change.
export class M004Sale extends Migration {
  override name = 'm004-sale';

  override up(): void {
    // Plain ADD COLUMN (MySQL 8.4 has no IF NOT EXISTS here): openOrm runs migrations under a named lock.
    this.addSql(`alter table coupon
      add column sale_starts_at bigint null,
      add column sale_ends_at bigint null,
      add column sale_paused tinyint(1) not null default 0,
      add column sale_revision int not null default 0`);
    this.addSql(
      `alter table stock_ledger modify kind enum('DEDUCT','COMPENSATE','RESTOCK','REPAIR','SALE_WINDOW','SALE_PAUSE','SALE_RESUME') not null`,
    );
  }

  override down(): void {
    this.addSql(`delete from stock_ledger where kind in ('SALE_WINDOW','SALE_PAUSE','SALE_RESUME')`);
    this.addSql(`alter table stock_ledger modify kind enum('DEDUCT','COMPENSATE','RESTOCK','REPAIR') not null`);
    this.addSql(
      'alter table coupon drop column sale_starts_at, drop column sale_ends_at, drop column sale_paused, drop column sale_revision',
    );
  }
}
