// shardstock reconcile: Redis, the events in flight and MySQL compared for one coupon.
import type { RunFn } from '../command.js';
import { EXIT } from '../errors.js';
import { println } from '../io.js';
import { flag, noMorePositionals, parse, positional } from '../options.js';
import { plainReconcile } from '../plain.js';
import { json, table } from '../render.js';
import { openSession } from '../session.js';

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, { repair: { type: 'boolean' } });
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const s = openSession(p, io);
  try {
    const r = plainReconcile(await s.call('Reconcile', (o) => s.client.reconcile({ couponId, repair: flag(p, 'repair') }, o)));
    if (s.json) json(io.stdout, r);
    else {
      println(io.stdout, r.consistent ? `${couponId}: CONSISTENT` : `${couponId}: DRIFT (ledger ${r.ledgerDrift}, redis ${r.redisDrift})`);
      if (r.repair) {
        const x = r.repair;
        println(
          io.stdout,
          `repair: rebuilt shards [${x.rebuiltShards.join(',')}] with ${x.loadedUnits} units, lowered ${-x.loweredUnits}, restored ${x.restoredUnits}, ${x.restoredRecords} records; bound ${x.bound}; paused ${x.pausedMs} ms`,
        );
      }
      println(io.stdout);
      table(
        io.stdout,
        ['where', 'figure', 'value'],
        [
          ['mysql', 'total stock', r.totalStock],
          ['mysql', 'ledger deducted', r.ledgerDeducted],
          ['mysql', 'ledger compensated', r.ledgerCompensated],
          ['mysql', 'ledger restocked', r.ledgerRestocked],
          ['mysql', 'settled remaining', r.settledRemaining],
          ['redis', 'available', r.redisAvailable],
          ['redis', 'net deducted', r.redisNetDeducted],
          ['in flight', 'net units', r.inFlightNet],
          ['in flight', 'outbox events', r.outboxEvents],
          ['in flight', 'jetstream pending', r.jetstreamPending],
          ['anomalies', 'count', r.anomalies],
          ['anomalies', 'units oversold', r.anomalyUnits],
          ['drift', 'ledger', r.ledgerDrift],
          ['drift', 'redis', r.redisDrift],
        ],
      );
      println(io.stdout, `checked at ${r.checkedAt}`);
    }
    return r.consistent ? EXIT.ok : EXIT.refused;
  } finally {
    s.close();
  }
};
