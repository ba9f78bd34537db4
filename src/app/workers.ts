// The background work an instance runs, as SHARDSTOCK_WORKERS asks: the sweep (moves whose mover died,
// restocks a crash interrupted) and settlement's relay, settler and reconciler.
import type { Config } from '../config.js';
import { Periodic } from './periodic.js';
import type { Domain } from './domain.js';

/** A restock younger than this is still being applied by its own call. */
const RESTOCK_GRACE_MS = 10_000;

export async function startWorkers(
  config: Readonly<Config>,
  domain: Domain,
  onError: (what: string, err: unknown) => void,
): Promise<Periodic[]> {
  const { admin, catalog, sweepPlan, settlement } = domain;
  const workers: Periodic[] = [];
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
