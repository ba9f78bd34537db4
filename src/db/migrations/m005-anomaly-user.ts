import { Migration } from '@mikro-orm/migrations';

// The user and the time of a refused deduction on its anomaly row: a recovery that rebuilds the shard which
// held its request record puts the record back (marked refused) and counts its units against the user's limit,
// as Redis did before the loss. Rows from before this migration have neither; the recovery then uses the row's
// creation time and restores the record without a user.
export class M005AnomalyUser extends Migration {
  override name = 'm005-anomaly-user';

  override up(): void {
    this.addSql(`alter table settlement_anomaly
      add column user_id varchar(128) null,
      add column occurred_at bigint null,
      add key ix_anomaly_coupon_reason (coupon_id, reason)`);
  }

  override down(): void {
    this.addSql('alter table settlement_anomaly drop key ix_anomaly_coupon_reason, drop column user_id, drop column occurred_at');
  }
}
