import { Migration } from '@mikro-orm/migrations';

// The live page lists the newest coupons (/ui/coupons: ORDER BY created_at DESC LIMIT 50): without this index
// every request scanned and sorted the whole coupon table.
export class M003CouponCreatedIndex extends Migration {
  override name = 'm003-coupon-created-index';

  override up(): void {
    this.addSql('create index ix_coupon_created_at on coupon (created_at)');
  }

  override down(): void {
    this.addSql('drop index ix_coupon_created_at on coupon');
  }
}
