// The figures components already keep, exported at scrape time: DeductService.stats, readiness, the watch
// streams and the change announcements. Nothing here runs on the call path.
import type { ReadinessState } from '../app/readiness.js';
import type { DeductStats } from '../domain/deduct.js';
import type { HoldSweepStats } from '../domain/hold-sweeper.js';
import type { OrderSweepStats } from '../domain/order-sweeper.js';
import type { OrderStats } from '../domain/orders.js';
import type { WatchStats } from '../watch/watch-service.js';
import type { StockLevel } from '../domain/model.js';
import type { Metrics } from './metrics.js';

/** Per-coupon gauges cover at most this many watched coupons (those with the most streams). */
export const MAX_COUPON_SERIES = 50;

export interface AppFigures {
  deductStats: DeductStats;
  readiness(): ReadinessState;
  watch: { stats(): WatchStats; busiest(limit: number): { couponId: string; level: StockLevel | undefined }[] };
  natsLevelSubscriptions(): number;
  announcements(): number;
  lowStockEvents(): number;
  /** Absent in tests that build figures by hand. */
  holdSweeps?: HoldSweepStats;
  levelProbes(): number;
  levelChecksPending(): number;
  /** Absent in tests that build figures by hand. */
  orderSweeps?: OrderSweepStats;
  orders?: OrderStats;
  /** Absent in tests that build figures by hand. */
  moveSweeper?: { readonly finished: number };
}

export function registerAppMetrics(m: Metrics, f: AppFigures): void {
  const s = f.deductStats;
  m.counterFrom(
    'shardstock_deduct_fallbacks_total',
    'Deducts whose home shard could not cover them (a fallback was planned)',
    () => s.fallbacks,
  );
  m.counterFrom('shardstock_fallback_moves_total', 'Fallback moves: units moved from another shard to a home shard', () => s.moves);
  m.counterFrom('shardstock_fallback_moved_units_total', 'Units moved between shards by fallback moves', () => s.movedUnits);
  m.counterFrom(
    'shardstock_sold_out_fast_path_total',
    'Deducts answered SOLD_OUT from memory without running a script',
    () => s.soldOutFastPath,
  );
  m.counterFrom('shardstock_shard_reloads_total', 'Shards found missing in Redis and reloaded from MySQL by Deduct', () => s.reloads);
  // Either count rising means a mover died between taking units out of a shard and landing them.
  m.counterFrom(
    'shardstock_stranded_moves_landed_by_callers_total',
    'Fallback moves left by a dead mover that a Deduct waiting on their units landed itself',
    () => s.strandedMovesLanded,
  );
  const moves = f.moveSweeper;
  if (moves)
    m.counterFrom(
      'shardstock_stranded_moves_landed_by_sweeper_total',
      "Fallback moves left by a dead mover that this instance's sweeper landed",
      () => moves.finished,
    );

  m.gaugeFrom('shardstock_ready', '1 when Redis, NATS and MySQL all answer (same answer as /readyz and grpc.health.v1)', () =>
    f.readiness().ready ? 1 : 0,
  );
  m.labelledGaugeFrom('shardstock_dependency_up', '1 when the dependency answered its last readiness ping', 'dependency', () =>
    Object.entries(f.readiness().checks).map(([name, c]) => [name, c.ok ? 1 : 0] as [string, number]),
  );

  m.gaugeFrom(
    'shardstock_watch_feeds',
    'Coupons with at least one WatchStock stream on this instance (= NATS level subscriptions)',
    () => f.watch.stats().feeds,
  );
  m.gaugeFrom('shardstock_watch_level_subscriptions', 'NATS subscriptions held for level pings', () => f.natsLevelSubscriptions());
  m.gaugeFrom(
    'shardstock_watch_pending_levels',
    'Levels waiting in WatchStock slots for a slow or paced reader (at most two per stream)',
    () => f.watch.stats().pendingLevels,
  );
  m.counterFrom(
    'shardstock_level_announcements_total',
    'Coupon change pings this instance published (coalesced: at most one per coupon per interval)',
    () => f.announcements(),
  );
  m.counterFrom(
    'shardstock_low_stock_events_total',
    'Low-stock events this instance published (once per crossing across all instances)',
    () => f.lowStockEvents(),
  );

  const h = f.holdSweeps;
  if (h) {
    m.counterFrom(
      'shardstock_holds_expired_total',
      'Holds this instance expired (its sweeper; each hold expires once across instances)',
      () => h.expiredHolds,
    );
    m.counterFrom('shardstock_hold_units_expired_total', 'Units given back by holds this instance expired', () => h.expiredUnits);
    m.counterFrom('shardstock_hold_sweeps_total', 'Hold sweeps this instance ran', () => h.sweeps);
    m.counterFrom(
      'shardstock_hold_index_repairs_total',
      "Shards with open holds the full pass found missing from the sweepers' index",
      () => h.reindexed,
    );
  }
  m.counterFrom(
    'shardstock_level_probes_total',
    'Shard probes of changed coupons for the low-stock and sold-out checks (bounded per announcement interval)',
    () => f.levelProbes(),
  );
  m.gaugeFrom('shardstock_level_checks_pending', 'Changed coupons waiting for their level-check probe', () => f.levelChecksPending());

  const os = f.orderSweeps;
  if (os) {
    m.counterFrom('shardstock_order_sweeps_total', 'Order sweeps this instance ran', () => os.sweeps);
    for (const how of ['abandoned', 'finished', 'expired'] as const)
      m.counterFrom(
        `shardstock_orders_${how}_by_sweeper_total`,
        `Orders this instance's sweeper ended as ${how} (their caller died or left them)`,
        () => os.ended[how],
      );
  }
  const o = f.orders;
  if (o)
    m.counterFrom(
      'shardstock_order_commits_undone_total',
      'Order commits whose holds did not all outlive them (a stall beyond SHARDSTOCK_ORDER_COMMIT_MARGIN_MS): confirmed items given back; should stay 0',
      () => o.undoneCommits,
    );

  const busiest = () => f.watch.busiest(MAX_COUPON_SERIES).filter((b) => b.level !== undefined);
  m.labelledGaugeFrom(
    'shardstock_coupon_available',
    `Available units of watched coupons (the ${MAX_COUPON_SERIES} with most streams)`,
    'coupon',
    () => busiest().map((b) => [b.couponId, b.level!.available] as [string, number]),
  );
  m.labelledGaugeFrom(
    'shardstock_coupon_pending_settlement',
    `Units deducted in Redis not settled in MySQL yet, for watched coupons (the ${MAX_COUPON_SERIES} with most streams)`,
    'coupon',
    () => busiest().map((b) => [b.couponId, b.level!.pendingSettlement] as [string, number]),
  );
}

/** Connection figures of each port's listener (open now, accepted, errors such as resets). */
export function registerConnectionMetrics(
  m: Metrics,
  ports: Record<string, { open: number; accepted: number; socketErrors: number }>,
): void {
  const each = (pick: (s: { open: number; accepted: number; socketErrors: number }) => number) => () =>
    Object.entries(ports).map(([port, s]) => [port, pick(s)] as [string, number]);
  m.labelledGaugeFrom(
    'shardstock_connections_open',
    'Open TCP connections by port',
    'port',
    each((s) => s.open),
  );
  m.labelledCounterFrom(
    'shardstock_connections_accepted_total',
    'TCP connections accepted by port',
    'port',
    each((s) => s.accepted),
  );
  m.labelledCounterFrom(
    'shardstock_connection_errors_total',
    'Socket errors by port (resets, broken pipes): each ends its own connection only',
    'port',
    each((s) => s.socketErrors),
  );
}
