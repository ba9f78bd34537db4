// The composition root: connects the infrastructure, builds the domain services and both transports,
// starts the background workers, and shuts everything down in order.
import { connect as connectNats, type NatsConnection } from 'nats';
import type { Cluster } from 'ioredis';
import type { MikroORM } from '@mikro-orm/mysql';
import { type Config, networkLimits } from '../config.js';
import { openOrm } from '../db/orm.js';
import { MikroCouponRepository } from '../db/coupon-repository.js';
import { CouponAdmin } from '../domain/admin.js';
import { CompensateService } from '../domain/compensate.js';
import { CouponCatalog } from '../domain/coupon-catalog.js';
import { DeductService } from '../domain/deduct.js';
import { MoveSweeper } from '../domain/move-sweeper.js';
import type { CouponRepository, StockStore } from '../domain/ports.js';
import { ShardReloader } from '../domain/shard-reloader.js';
import { SoldOutCache } from '../domain/sold-out-cache.js';
import { NatsStockSignals } from '../nats/stock-signals.js';
import { connectCluster } from '../redis/cluster.js';
import { ReplicaAck } from '../redis/replica-ack.js';
import { FailoverFence } from '../redis/failover-fence.js';
import type { CallGate } from '../access/call-gate.js';
import { callGate, grpcServerCredentials, guards, natsSecurity, tlsMaterial } from './security.js';
import { SlotMapPlacement } from '../redis/shard-tags.js';
import { RedisStockStore } from '../redis/stock-store.js';
import { grpcNetwork, startGrpcServer, type GrpcServer } from '../transport/grpc-server.js';
import { createHandlers, type InventoryHandlers } from '../transport/handlers.js';
import { inventoryRoutes } from '../transport/connect-routes.js';
import { startHttpServer, type HttpServer, type PlainRoute } from '../transport/http-server.js';
import { guardErrors } from '../util/guard-errors.js';
import { createLogger, type Logger } from '../util/logger.js';
import { Periodic } from './periodic.js';
import { Readiness } from './readiness.js';
import { Settlement } from '../settlement/settlement.js';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import { listRecentCoupons } from '../db/coupon-list.js';
import { registerAppMetrics, registerConnectionMetrics } from '../observability/app-metrics.js';
import { attachSettlementMetrics } from '../observability/settlement-metrics.js';
import { instrumentHandlers } from '../observability/instrument-handlers.js';
import { Metrics } from '../observability/metrics.js';
import { metricsRoute } from '../observability/metrics-route.js';
import { timed } from '../observability/timed-store.js';
import { RedisLowStockMarks } from '../redis/low-stock-marks.js';
import { uiRoutes } from '../ui/ui-routes.js';
import { ChangeAnnouncer } from '../watch/change-announcer.js';
import { LevelBus } from '../watch/level-bus.js';
import { LowStockDetector } from '../watch/low-stock.js';
import { WatchService } from '../watch/watch-service.js';

export interface App {
  config: Readonly<Config>;
  grpcPort: number;
  httpPort: number;
  log: Logger;
  redis: Cluster;
  orm: MikroORM;
  nats: NatsConnection;
  store: RedisStockStore;
  repo: CouponRepository;
  handlers: InventoryHandlers;
  admin: CouponAdmin;
  deduct: DeductService;
  sweeper: MoveSweeper;
  readiness: Readiness;
  /** Failover fence (SHARDSTOCK_FAILOVER_FENCE), undefined when off. */
  fence: FailoverFence | undefined;
  /** Auth, rate limits and load shedding in front of both ports. */
  gate: CallGate;
  metrics: Metrics;
  watch: WatchService;
  levels: LevelBus;
  changes: ChangeAnnouncer;
  lowStock: LowStockDetector;
  settlement: Settlement;
  close(): Promise<void>;
}

async function waitReady(redis: Cluster, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`Redis Cluster not ready after ${timeoutMs} ms`)), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export async function startApp(config: Readonly<Config>, logger?: Logger): Promise<App> {
  const log = logger ?? createLogger(config.logLevel, { instance: config.instanceId });
  const redis = connectCluster({
    nodes: config.redisNodes,
    username: config.redisUsername,
    password: config.redisPassword,
    tls: tlsMaterial(config.redisTls),
  });
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis cluster error'));
  await waitReady(redis, 15_000);
  const orm = await openOrm({ url: config.mysqlUrl, tls: tlsMaterial(config.mysqlTls) });
  const nats = await connectNats({
    servers: config.natsUrl.split(','),
    name: `shardstock-${config.instanceId}`,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    ...natsSecurity(config),
  }).catch(async (err: unknown) => {
    // Refused credentials, no server: what is already open must not keep the process alive.
    redis.disconnect();
    await orm.close(true);
    throw err;
  });

  const replicaAck = config.ackLevel === 'replica' ? new ReplicaAck(redis, config.waitTimeoutMs, config.ackReplicas) : undefined;
  const fence = config.failoverFence
    ? new FailoverFence(redis, {
        ackLevel: config.ackLevel,
        replicas: config.ackReplicas,
        onFenced: (e) => log.warn(e, 'redis slots changed master: writes to them fenced until the new master is confirmed'),
        onReopened: (e) => log.info(e, 'redis slots reopened after failover'),
      })
    : undefined;
  const store = new RedisStockStore(redis, {
    namespace: config.namespace,
    idempotencyWindowS: config.idempotencyWindowS,
    replicaAck,
    fence,
  });
  const metrics = new Metrics();
  const refused = (port: 'grpc' | 'http') => (reason: string) => metrics.refusals.child(port, reason).inc();
  const gate = callGate(config, (reason, transport) => refused(transport === 'grpc' ? 'grpc' : 'http')(reason));
  const guard = guards(gate);
  const onServerError = (port: string) => (err: Error) => log.warn({ port, err: err.message }, 'listener error');
  const guardedStore: StockStore = guardErrors(timed(store, metrics.redisDuration, metrics.redisErrors), 'Redis');
  const repo: CouponRepository = guardErrors(new MikroCouponRepository(orm), 'the database');
  const signals = new NatsStockSignals(nats, config.namespace);
  const catalog = new CouponCatalog(repo);
  const soldOut = new SoldOutCache(config.soldOutTtlMs, signals);
  const onError = (what: string, err: unknown) => log.warn({ err: (err as Error)?.message, what }, 'background step failed');
  // WatchStock and low-stock events: use cases mark coupons changed; one timer announces them over NATS.
  const levels = new LevelBus(nats, config.namespace, config.instanceId);
  const lowStock = new LowStockDetector({
    coupon: (id) => catalog.get(id),
    store: guardedStore,
    marks: new RedisLowStockMarks(redis, config.namespace),
    publish: (event) => {
      levels.publishLowStock(event);
      log.info(event, 'low stock');
    },
    global: config.lowStockThreshold,
    overrides: config.lowStockOverrides,
    onError,
  });
  const changes = new ChangeAnnouncer(levels, Math.max(1, Math.floor(config.watchMinIntervalMs / 2)), (id, returned) =>
    lowStock.check(id, returned),
  );

  // Settlement (outbox -> JetStream -> MySQL): its in-flight count also tells a shard reload what is still on its way.
  const settlement = new Settlement({ config, redis, nats, orm, signals, stock: guardedStore, replicaAck, log });
  const reloader = new ShardReloader(settlement.recovery, (couponId, shards, units) =>
    log.warn({ couponId, shards, units }, 'rebuilt missing shards from MySQL and the events in flight'),
  );
  const admin = new CouponAdmin({
    repo,
    store: guardedStore,
    catalog,
    soldOut,
    signals,
    reloader,
    defaultShards: config.defaultShards,
    changes,
    placement: new SlotMapPlacement(() => redis.slots),
  });
  const deduct = new DeductService(catalog, guardedStore, soldOut, reloader, config.maxQuantity, onError, changes);
  const compensate = new CompensateService(catalog, guardedStore, soldOut, signals, reloader, changes);
  const sweeper = new MoveSweeper(guardedStore, reloader);
  const watch = new WatchService({
    coupon: (id) => catalog.get(id),
    readLevel: (id) => admin.level(id, true),
    listen: (id, cb) => levels.listen(id, cb),
    floorMs: config.watchMinIntervalMs,
    maxLifetimeMs: config.maxStreamLifetimeMs,
    onError,
  });
  const handlers = createHandlers({ admin, deduct, compensate, watch, reconcile: settlement.reconciler });

  // Failures are logged by the instrumented handlers, with the call's request ids; not twice.
  const onUnexpected = () => {};
  const readiness = new Readiness([
    { name: 'redis', ping: () => redis.ping() },
    { name: 'mysql', ping: () => orm.em.fork().getConnection().execute('select 1'), critical: false },
    { name: 'nats', ping: () => nats.flush(), critical: false },
  ]);
  registerAppMetrics(metrics, {
    deductStats: deduct.stats,
    readiness: () => readiness.current(),
    watch,
    natsLevelSubscriptions: () => levels.subscriptions,
    announcements: () => changes.announced,
    lowStockEvents: () => lowStock.events,
  });
  attachSettlementMetrics(metrics, () => settlement.figures());
  const plain: PlainRoute[] = [
    metricsRoute(metrics),
    uiRoutes({
      listCoupons: (limit) => listRecentCoupons(orm, limit),
      admit: (req) => guard.http('ListCoupons', req.headers.authorization, req.socket?.remoteAddress ?? ''),
    }),
    (req, res) => {
      if (req.url !== '/healthz' && req.url !== '/readyz') return false;
      const state = readiness.publicView();
      const ok = req.url === '/healthz' || state.ready;
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/healthz' ? { status: 'ok' } : state));
      return true;
    },
  ];

  let grpc: GrpcServer | undefined;
  let http: HttpServer | undefined;
  const workers: Periodic[] = [];
  try {
    grpc = await startGrpcServer(config.grpcAddr, instrumentHandlers(handlers, { metrics, transport: 'grpc', log }), {
      maxMessageBytes: config.maxMessageBytes,
      onUnexpected,
      guard: guard.grpc,
      credentials: grpcServerCredentials(config),
      network: grpcNetwork(config),
      reflection: config.reflection,
      onRefused: refused('grpc'),
      onServerError: onServerError('grpc'),
    });
    http = await startHttpServer(config.httpAddr, {
      routes: inventoryRoutes(instrumentHandlers(handlers, { metrics, transport: 'connect', log }), { onUnexpected, guard: guard.connect }),
      plain,
      maxMessageBytes: config.maxMessageBytes,
      limits: networkLimits(config),
      onRefused: refused('http'),
      onServerError: onServerError('http'),
    });
  } catch (err) {
    grpc?.server.forceShutdown();
    await http?.close(0);
    throw err;
  }
  registerConnectionMetrics(metrics, { grpc: grpc.connections, http: http.connections });
  metrics.gaugeFrom(
    'shardstock_streams_open',
    'Long-lived streams admitted by the gate and still open (WatchStock, health Watch, reflection)',
    () => gate.streams?.open ?? 0,
  );
  const g = grpc;
  readiness.onChange((ready) => {
    const status = ready ? 'SERVING' : 'NOT_SERVING';
    g.health.setStatus('', status);
    g.health.setStatus(InventoryService.typeName, status);
    log.info({ ready, checks: readiness.current().checks }, 'readiness changed');
  });
  await readiness.check();
  readiness.start();

  if (config.workers.has('sweep')) {
    workers.push(
      new Periodic(
        'sweep',
        config.sweepIntervalMs,
        async () => {
          for (const coupon of catalog.active()) await sweeper.sweep(coupon);
          for (const r of await repo.unappliedRestocks(10_000)) {
            const coupon = await repo.find(r.couponId);
            if (coupon) await admin.applyRestock(coupon, r.requestId, r.quantity);
          }
        },
        onError,
      ).start(),
    );
  }

  await settlement.start({ activeCoupons: () => catalog.active() });

  log.info(
    { grpc: config.grpcAddr, grpcPort: grpc.port, http: config.httpAddr, httpPort: http.port, ackLevel: config.ackLevel },
    'shardstock serving',
  );

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      readiness.stop();
      g.health.setStatus('', 'NOT_SERVING');
      g.health.setStatus(InventoryService.typeName, 'NOT_SERVING');
      // Stop accepting, let in-flight calls finish within the grace period, then cut what is left.
      // Watch streams end now (they would otherwise hold the servers open for the whole grace period).
      watch.close();
      const grpcDone = new Promise<void>((resolve) => g.server.tryShutdown(() => resolve()));
      const grace = setTimeout(() => g.server.forceShutdown(), config.shutdownGraceMs);
      await Promise.all([grpcDone, http!.close(config.shutdownGraceMs)]);
      clearTimeout(grace);
      await Promise.all(workers.map((w) => w.stop()));
      await settlement.stop();
      signals.close();
      changes.close();
      await nats.drain().catch(() => nats.close());
      fence?.stop();
      await redis.quit().catch(() => redis.disconnect());
      await orm.close(true);
      log.info('shardstock stopped');
    })());

  return {
    config,
    grpcPort: grpc.port,
    httpPort: http.port,
    log,
    redis,
    orm,
    nats,
    store,
    repo,
    handlers,
    admin,
    deduct,
    sweeper,
    readiness,
    fence,
    gate,
    metrics,
    watch,
    levels,
    changes,
    lowStock,
    settlement,
    close,
  };
}
