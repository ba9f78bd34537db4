// The background work an instance runs, as SHARDSTOCK_WORKERS asks: the sweep (moves whose mover died,
// restocks a crash interrupted) and settlement's relay, settler and reconciler.
import type { Config } from '../config.js';
import { Periodic } from './periodic.js';
import type { Domain } from './domain.js';

/** A restock younger than this is still being applied by its own call. */
const RESTOCK_GRACE_MS = 10_000;
/** How often the hold sweeper's backstop looks at every active coupon's shards (index entries lost in a crash). */
const HOLD_FULL_PASS_MS = 30_000;

export async function startWorkers(
  config: Readonly<Config>,
  domain: Domain,
  onError: (what: string, err: unknown) => void,
): Promise<Periodic[]> {
  const { admin, catalog, sweepPlan, settlement, holdSweeper, orderSweeper } = domain;
  const workers: Periodic[] = [];
  // Every instance expires holds, whatever its roles: a hold must not depend on the instance that made it.
  workers.push(new Periodic('hold sweep', config.holdSweepMs, () => holdSweeper.sweep(), onError).start());
  // Likewise orders: one whose caller died is finished (committed) or undone (pending) by any instance.
  workers.push(new Periodic('order sweep', config.orderSweepMs, () => orderSweeper.sweep().then(() => {}), onError).start());
  workers.push(new Periodic('hold full pass', HOLD_FULL_PASS_MS, () => holdSweeper.fullPass(catalog.active()), onError).start());
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
