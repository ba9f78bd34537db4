// The composition root, read top-down: connect (connect.ts) → domain (domain.ts: adapters and use cases) →
// transports (transports.ts: both ports over one handler set) → workers (workers.ts), with readiness and
// health in lifecycle.ts; and the shutdown, in the reverse order.
import type { MikroORM } from '@mikro-orm/mysql';
import type { Cluster } from 'ioredis';
import type { NatsConnection } from 'nats';
import type { CallGate } from '../access/call-gate.js';
import type { Config } from '../config.js';
import { listRecentCoupons } from '../db/coupon-list.js';
import type { CouponAdmin } from '../domain/admin.js';
import type { DeductService } from '../domain/deduct.js';
import type { CouponRepository } from '../domain/ports.js';
import { registerAppMetrics, registerConnectionMetrics } from '../observability/app-metrics.js';
import { Metrics } from '../observability/metrics.js';
import { metricsRoute } from '../observability/metrics-route.js';
import { attachSettlementMetrics } from '../observability/settlement-metrics.js';
import type { FailoverFence } from '../redis/failover-fence.js';
import type { RedisStockStore } from '../redis/stock-store.js';
import type { Settlement } from '../settlement/settlement.js';
import { createHandlers } from '../transport/handlers.js';
import type { HoldService } from '../domain/hold-service.js';
import type { HoldSweeper } from '../domain/hold-sweeper.js';
import type { OrderService } from '../domain/orders.js';
import type { OrderSweeper } from '../domain/order-sweeper.js';
import { uiRoutes } from '../ui/ui-routes.js';
import { backgroundErrors, createLogger, type Logger } from '../util/logger.js';
import type { ChangeAnnouncer } from '../watch/change-announcer.js';
import type { LevelBus } from '../watch/level-bus.js';
import type { WatchService } from '../watch/watch-service.js';
import { closeAll, connectAll } from './connect.js';
import { buildDomain } from './domain.js';
import { dependencyReadiness, followReadiness, healthRoute, setServing } from './lifecycle.js';
import { callGate, guards } from './security.js';
import { startTransports } from './transports.js';
import { startWorkers } from './workers.js';
import type { SaleControl } from '../domain/sale.js';
import type { StockEventDetector } from '../watch/stock-events.js';
import { foldLegacyLayout } from '../redis/legacy-fold.js';
import { CLAIM_HOLD_S } from '../redis/stock-store.js';
import type { LevelChecks } from '../watch/level-checks.js';
import type { SweepPlan } from '../domain/sweep-plan.js';

/** A running instance: its ports, and what tests and the bench reach into. */
export interface App {
  config: Readonly<Config>;
  grpcPort: number;
  httpPort: number;
  redis: Cluster;
  orm: MikroORM;
  nats: NatsConnection;
  store: RedisStockStore;
  repo: CouponRepository;
  admin: CouponAdmin;
  deduct: DeductService;
  holds: HoldService;
  holdSweeper: HoldSweeper;
  /** Orders of several items (docs/orders.md) and the sweeper that ends those whose caller died. */
  orders: OrderService;
  orderSweeper: OrderSweeper;
  /** Failover fence (SHARDSTOCK_FAILOVER_FENCE), undefined when off. */
  fence: FailoverFence | undefined;
  /** Auth, rate limits and load shedding in front of both ports. */
  gate: CallGate;
  metrics: Metrics;
  watch: WatchService;
  levels: LevelBus;
  changes: ChangeAnnouncer;
  stockEvents: StockEventDetector;
  /** When changed coupons are probed for the low-stock and sold-out checks. */
  levelChecks: LevelChecks;
  /** Which shards the move sweep reads (SHARDSTOCK_WORKERS sweep). */
  sweepPlan: SweepPlan;
  settlement: Settlement;
  sale: SaleControl;
  close(): Promise<void>;
}

export interface AppOptions {
  /** The clock sale windows are judged by (ms since epoch); tests pass one they control. */
  now?: (() => number) | undefined;
}

export async function startApp(config: Readonly<Config>, logger?: Logger, options: AppOptions = {}): Promise<App> {
  const log = logger ?? createLogger(config.logLevel, { instance: config.instanceId });
  const conns = await connectAll(config, log);
  // Before anything serves: records of the per-request layout an older version wrote must be honoured.
  const fold = await foldLegacyLayout(conns.redis, config.namespace, config.idempotencyWindowS, CLAIM_HOLD_S * 1000);
  if (fold.scanned) log.info({ folded: fold.folded }, 'redis layout: legacy per-request keys folded into the bucketed hashes');
  const onError = backgroundErrors(log);

  const metrics = new Metrics();
  // One counter child per port and reason, bound on first use: a shedding storm refuses on the hot path.
  const refused = (port: 'grpc' | 'http') => {
    const byReason = new Map<string, { inc(): void }>();
    return (reason: string) => {
      let c = byReason.get(reason);
      if (!c) {
        c = metrics.refusals.child(port, reason);
        byReason.set(reason, c);
      }
      c.inc();
    };
  };
  const refusedGrpc = refused('grpc');
  const refusedHttp = refused('http');
  const gate = callGate(config, (reason, transport) => (transport === 'grpc' ? refusedGrpc : refusedHttp)(reason));
  const guard = guards(gate);
  const domain = buildDomain(config, conns, { log, metrics, onError, now: options.now ?? Date.now });
  const { admin, deduct, compensate, watch, levels, changes, lowStock, stockEvents, settlement, sale, audit, holds, orders } = domain;
  const handlers = createHandlers({ admin, deduct, compensate, watch, reconcile: settlement.reconciler, sale, audit, holds, orders });

  const readiness = dependencyReadiness(conns);
  registerAppMetrics(metrics, {
    deductStats: deduct.stats,
    readiness: () => readiness.current(),
    watch,
    natsLevelSubscriptions: () => levels.subscriptions,
    announcements: () => changes.announced,
    lowStockEvents: () => lowStock.events,
    holdSweeps: domain.holdSweeper.stats,
    levelProbes: () => domain.levelChecks.probes,
    levelChecksPending: () => domain.levelChecks.pending,
    orderSweeps: domain.orderSweeper.stats,
    orders: domain.orders.stats,
    moveSweeper: domain.sweeper,
  });
  attachSettlementMetrics(metrics, () => settlement.figures());
  const plain = [
    metricsRoute(metrics),
    uiRoutes({
      listCoupons: (limit) => listRecentCoupons(conns.orm, limit),
      admit: (req) => guard.http('ListCoupons', req.headers.authorization, req.socket?.remoteAddress ?? ''),
    }),
    healthRoute(readiness),
  ];

  const { grpc, http } = await startTransports(config, { handlers, plain, gate, metrics, log, refused });
  registerConnectionMetrics(metrics, { grpc: grpc.connections, http: http.connections });
  metrics.gaugeFrom(
    'shardstock_streams_open',
    'Long-lived streams admitted by the gate and still open (WatchStock, health Watch, reflection)',
    () => gate.streams?.open ?? 0,
  );
  followReadiness(readiness, grpc.health, log);
  await readiness.check();
  readiness.start();

  const workers = await startWorkers(config, domain, onError);

  log.info(
    { grpc: config.grpcAddr, grpcPort: grpc.port, http: config.httpAddr, httpPort: http.port, ackLevel: config.ackLevel },
    'shardstock serving',
  );

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      readiness.stop();
      setServing(grpc.health, false);
      // Stop accepting, let in-flight calls finish within the grace period, then cut what is left.
      // Watch streams end now (they would otherwise hold the servers open for the whole grace period).
      watch.close();
      const grpcDone = new Promise<void>((resolve) => grpc.server.tryShutdown(() => resolve()));
      const grace = setTimeout(() => grpc.server.forceShutdown(), config.shutdownGraceMs);
      await Promise.all([grpcDone, http.close(config.shutdownGraceMs)]);
      clearTimeout(grace);
      await Promise.all(workers.map((w) => w.stop()));
      await settlement.stop();
      domain.signals.close();
      domain.saleSignals.close();
      changes.close();
      domain.levelChecks.close();
      domain.fence?.stop();
      await closeAll(conns);
      log.info('shardstock stopped');
    })());

  return {
    config,
    grpcPort: grpc.port,
    httpPort: http.port,
    redis: conns.redis,
    orm: conns.orm,
    nats: conns.nats,
    store: domain.store,
    repo: domain.repo,
    admin,
    deduct,
    holds,
    holdSweeper: domain.holdSweeper,
    orders,
    orderSweeper: domain.orderSweeper,
    fence: domain.fence,
    gate,
    metrics,
    watch,
    levels,
    changes,
    stockEvents,
    levelChecks: domain.levelChecks,
    sweepPlan: domain.sweepPlan,
    settlement,
    sale,
    close,
  };
}
