// The background work an instance runs, as SHARDSTOCK_WORKERS asks: the sweep (moves whose mover died,
// restocks a crash interrupted) and settlement's relay, settler and reconciler.
import type { Config } from '../config.js';
import { CouponWalk, eachOnce } from '../domain/coupon-walk.js';
import { Periodic } from './periodic.js';
import type { Domain } from './domain.js';

/** A restock younger than this is still being applied by its own call. */
const RESTOCK_GRACE_MS = 10_000;
/** Coupons of MySQL the hold sweeper's backstop adds to each pass (with 10,000 coupons, all within 5 minutes). */
const HOLD_FULL_PASS_PAGE = 1000;

export async function startWorkers(
  config: Readonly<Config>,
  domain: Domain,
  onError: (what: string, err: unknown) => void,
): Promise<Periodic[]> {
  const { admin, catalog, repo, sweepPlan, settlement, holdSweeper, orderSweeper } = domain;
  const workers: Periodic[] = [];
  // Every instance expires holds, whatever its roles: a hold must not depend on the instance that made it.
  workers.push(new Periodic('hold sweep', config.holdSweepMs, () => holdSweeper.sweep(), onError).start());
  // Likewise orders: one whose caller died is finished (committed) or undone (pending) by any instance.
  workers.push(new Periodic('order sweep', config.orderSweepMs, () => orderSweeper.sweep().then(() => {}), onError).start());
  // The backstop for holds whose index entry a crash lost: the coupons served here, and a page of every coupon,
  // since the holds of a coupon no call brought to a live instance would otherwise never be found.
  const walk = new CouponWalk(repo, HOLD_FULL_PASS_PAGE);
  const fullPass = async () => holdSweeper.fullPass(eachOnce(catalog.active(), await walk.next()));
  workers.push(new Periodic('hold full pass', config.holdFullPassMs, fullPass, onError).start());
  if (config.workers.has('sweep')) {
    // Suspect shards plus a bounded slice of every served shard (src/domain/sweep-plan.ts), not every shard.
    const sweep = async () => {
      try {
        await sweepPlan.run();
      } finally {
        await admin.finishRestocks(RESTOCK_GRACE_MS);
      }
    };
    workers.push(new Periodic('sweep', config.sweepIntervalMs, sweep, onError).start());
  }
  await settlement.start({ activeCoupons: () => catalog.active() });
  return workers;
}
