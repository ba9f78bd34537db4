// Builds the adapters over the open connections and the use cases over them: the stock store (with replica
// acks, the failover fence, timing and error guarding), the coupon repository, NATS signals and level bus,
// settlement (whose recovery rebuilds lost shards), and the Deduct / Compensate / admin / watch services.
import type { Config } from '../config.js';
import { MikroCouponRepository } from '../db/coupon-repository.js';
import { RecoveryRepository } from '../db/recovery-repository.js';
import { CouponAdmin } from '../domain/admin.js';
import { CompensateService } from '../domain/compensate.js';
import { CouponCatalog } from '../domain/coupon-catalog.js';
import { DeductService } from '../domain/deduct.js';
import { HoldService } from '../domain/hold-service.js';
import { HoldSweeper } from '../domain/hold-sweeper.js';
import { RedisHoldStore } from '../redis/hold-store.js';
import { MoveSweeper } from '../domain/move-sweeper.js';
import { MoveSuspects, moveObservers, SweepPlan } from '../domain/sweep-plan.js';
import type { CouponRepository, HoldStore, StockStore } from '../domain/ports.js';
import { ShardReloader } from '../domain/shard-reloader.js';
import { SoldOutCache } from '../domain/sold-out-cache.js';
import { NatsStockSignals } from '../nats/stock-signals.js';
import type { Metrics } from '../observability/metrics.js';
import { combineObservers, timed } from '../observability/timed-store.js';
import { FailoverFence } from '../redis/failover-fence.js';
import { RedisRecoveryStore } from '../redis/recovery-store.js';
import { RedisLowStockMarks } from '../redis/low-stock-marks.js';
import { ReplicaAck } from '../redis/replica-ack.js';
import { SlotMapPlacement } from '../redis/shard-tags.js';
import { RedisStockStore } from '../redis/stock-store.js';
import { SettlementStreamReader, settlementNames } from '../settlement/jetstream.js';
import { OutboxStreams } from '../settlement/relay/outbox.js';
import { OutboxWrites, outboxObservers } from '../settlement/relay/outbox-writes.js';
import { JetStreamPublisher } from '../settlement/relay/publisher.js';
import { FastSettle } from '../settlement/settle/fast-settle.js';
import { LedgerStore } from '../settlement/settle/ledger-store.js';
import { RedisRefusalStore } from '../settlement/settle/refusal-store.js';
import { Settlement } from '../settlement/settlement.js';
import { adapterError, guardErrors } from '../util/guard-errors.js';
import type { Logger } from '../util/logger.js';
import { ChangeAnnouncer } from '../watch/change-announcer.js';
import { LevelBus } from '../watch/level-bus.js';
import { LowStockDetector } from '../watch/low-stock.js';
import { LevelChecks } from '../watch/level-checks.js';
import { levelObservers, ShardLevels } from '../watch/shard-levels.js';
import { WatchService } from '../watch/watch-service.js';
import { StockEventDetector } from '../watch/stock-events.js';
import { RedisStockEventMarks } from '../redis/sold-out-marks.js';
import { allShards } from '../domain/routing.js';
import { NatsSaleSignals } from '../nats/sale-signals.js';
import { MikroSaleRepository } from '../db/sale-repository.js';
import { SaleControl } from '../domain/sale.js';
import { AuditService } from '../audit/audit-service.js';
import { MikroAuditRecords } from '../db/audit-repository.js';
import { RedisRequestRecords } from '../redis/request-record.js';
import type { Connections } from './connect.js';
import { buildOrders } from './orders.js';

export type Domain = ReturnType<typeof buildDomain>;

/** Checked against the idempotency window and the orders' needs by loadConfig (src/config.ts). */
function holdTtl(config: Readonly<Config>) {
  return { minMs: config.holdTtlMinMs, maxMs: config.holdTtlMaxMs, defaultMs: config.holdTtlDefaultMs };
}

export function buildDomain(
  config: Readonly<Config>,
  c: Connections,
  d: {
    log: Logger;
    metrics: Metrics;
    onError: (what: string, err: unknown) => void;
    /** The clock sale windows are judged by (ms since epoch). */
    now: () => number;
  },
) {
  const { redis, orm, nats } = c;
  const { log, metrics, onError, now } = d;
  const replicaAck = config.ackLevel === 'replica' ? new ReplicaAck(redis, config.waitTimeoutMs, config.ackReplicas) : undefined;
  const fence = config.failoverFence
    ? new FailoverFence(redis, {
        ackLevel: config.ackLevel,
        replicas: config.ackReplicas,
        onFenced: (e) => log.warn(e, 'redis slots changed master: writes to them fenced until the new master is confirmed'),
        onReopened: (e) => log.info(e, 'redis slots reopened after failover'),
      })
    : undefined;
  const batchSizes = metrics.shardBatchSize.child();
  const readBatchSizes = metrics.recordReadBatchSize.child();
  const store = new RedisStockStore(redis, {
    namespace: config.namespace,
    idempotencyWindowS: config.idempotencyWindowS,
    replicaAck,
    fence,
    batch: {
      max: config.shardBatchMax,
      waitUs: config.shardBatchWaitUs,
      gapUs: config.shardBatchGapUs,
      gapFrom: config.shardBatchGapFrom,
      onBatch: (n) => batchSizes.observe(n),
      onReadBatch: (n) => readBatchSizes.observe(n),
    },
  });
  // Every Deduct, probe and move answer tells the level checks what its shard holds (shard-levels.ts).
  const shardLevels = new ShardLevels();
  // Moves and probes also tell the move sweep which shards may hold pending moves (sweep-plan.ts).
  const moveSuspects = new MoveSuspects();
  // Deductions and compensations made here tell this instance's relay to read their shards at once.
  const outboxWrites = new OutboxWrites();
  // Timed, watched and guarded (adapter errors → UNAVAILABLE) in one wrapper: it sits on every Deduct.
  const guardedStore: StockStore = timed(store, metrics.redisDuration, metrics.redisErrors, {
    observers: combineObservers(levelObservers(shardLevels), moveObservers(moveSuspects), outboxObservers(outboxWrites)),
    mapError: adapterError('Redis'),
  });
  const repo: CouponRepository = guardErrors(new MikroCouponRepository(orm), 'the database');
  const signals = new NatsStockSignals(nats, config.namespace);
  const catalog = new CouponCatalog(repo);
  const soldOut = new SoldOutCache(config.soldOutTtlMs, signals);
  // WatchStock and the level events: use cases mark coupons changed; one timer announces them over NATS,
  // then the level checks probe the coupons that may have crossed a threshold (level-checks.ts).
  const levels = new LevelBus(nats, config.namespace);
  const lowStock = new LowStockDetector({
    marks: new RedisLowStockMarks(redis, config.namespace),
    publish: (event) => {
      levels.publishLowStock(event);
      log.info(event, 'low stock');
    },
    global: config.lowStockThreshold,
    overrides: config.lowStockOverrides,
  });
  // Sold-out / back-in-stock events; `admin` is built below (the level reads happen only after announcements).
  const stockEvents = new StockEventDetector({
    exactLevel: (id) => admin.level(id, false),
    marks: new RedisStockEventMarks(redis, config.namespace),
    publish: (event) => {
      levels.publishStockEvent(event);
      log.info(event, event.kind === 'sold_out' ? 'sold out' : 'back in stock');
    },
  });
  const announceMs = Math.max(1, Math.floor(config.watchMinIntervalMs / 2));
  const levelChecks = new LevelChecks({
    coupon: (id) => catalog.get(id),
    peek: (id) => catalog.peek(id),
    probe: async (coupon) => (await guardedStore.probe(allShards(coupon))).reduce((sum, s) => sum + (s.available ?? 0) + s.inTransit, 0),
    levels: shardLevels,
    checks: [lowStock, stockEvents],
    onError,
    tickMs: announceMs,
  });
  const changes = new ChangeAnnouncer(levels, announceMs, (id, returned) => levelChecks.changed(id, returned));

  // Settlement (outbox -> JetStream -> MySQL): its in-flight count also tells a shard reload what is still on its way.
  const names = settlementNames(config.namespace);
  const ledger = new LedgerStore(orm);
  const settlement = new Settlement(
    {
      ledger,
      fastSettle: new FastSettle(orm),
      outbox: new OutboxStreams(redis, config.namespace, config.instanceId, config.idempotencyWindowS),
      stream: new SettlementStreamReader(nats, names),
      publisher: new JetStreamPublisher(nats, names),
      refusals: new RedisRefusalStore(redis, config.namespace, config.idempotencyWindowS, replicaAck),
      recoveryRepo: new RecoveryRepository(orm),
      recoveryStore: new RedisRecoveryStore(redis, config.namespace, config.idempotencyWindowS, replicaAck),
      stock: guardedStore,
      signals,
      nats,
      log,
      outboxWrites,
    },
    config,
  );
  const reloader = new ShardReloader(settlement.recovery, (couponId, shards, units) =>
    log.warn({ couponId, shards, units }, 'rebuilt missing shards from MySQL and the events in flight'),
  );
  const placement = new SlotMapPlacement(() => redis.slots);
  redis.on('refresh', () => placement.invalidate());
  const admin = new CouponAdmin({
    repo,
    store: guardedStore,
    catalog,
    soldOut,
    signals,
    reloader,
    defaultShards: config.defaultShards,
    changes,
    placement,
    now,
  });
  // Its own instance, so that the sweeper's count of finished moves stays the sweeper's (/metrics shows both).
  const callerLanding = new MoveSweeper(guardedStore, reloader);
  const deduct = new DeductService(catalog, guardedStore, soldOut, reloader, config.maxQuantity, onError, changes, now, callerLanding);
  const saleSignals = new NatsSaleSignals(nats, config.namespace);
  const sale = new SaleControl({ repo: guardErrors(new MikroSaleRepository(orm), 'the database'), catalog, signals: saleSignals, changes });
  const compensate = new CompensateService(catalog, guardedStore, soldOut, signals, reloader, changes);
  const sweeper = new MoveSweeper(guardedStore, reloader);
  const holdStore = new RedisHoldStore(redis, {
    namespace: config.namespace,
    idempotencyWindowS: config.idempotencyWindowS,
    replicaAck,
    fence,
    batch: store.reserveBatcher(),
  });
  const guardedHolds: HoldStore = guardErrors(holdStore, 'Redis');
  // A hold must end while its record (kept at least one idempotency window) is there: at most half a window.
  const ttl = holdTtl(config);
  const holds = new HoldService(deduct, catalog, guardedHolds, reloader, soldOut, signals, ttl, config.maxQuantity, changes);
  const holdSweeper = new HoldSweeper(holdStore, soldOut, signals, changes, onError);
  const { orders, orderSweeper } = buildOrders(config, redis, { holds, holdTtl: ttl, compensate, catalog, replicaAck, fence, onError });
  const sweepPlan = new SweepPlan({ suspects: moveSuspects, sweeper, coupons: catalog, intervalMs: config.sweepIntervalMs });
  const watch = new WatchService({
    coupon: (id) => catalog.get(id),
    readLevel: (id) => admin.level(id, true),
    listen: (id, cb) => levels.listen(id, cb),
    floorMs: config.watchMinIntervalMs,
    maxLifetimeMs: config.maxStreamLifetimeMs,
    onError,
  });
  const audit = new AuditService({
    coupon: (id) => catalog.get(id),
    records: guardErrors(new MikroAuditRecords(orm), 'the database'),
    requests: guardErrors(new RedisRequestRecords(redis, config.namespace, config.idempotencyWindowS), 'Redis'),
    inFlight: (coupon) => settlement.inFlight.snapshot(coupon),
    now,
  });
  return {
    fence,
    store,
    repo,
    signals,
    saleSignals,
    catalog,
    levels,
    lowStock,
    stockEvents,
    levelChecks,
    shardLevels,
    changes,
    settlement,
    admin,
    deduct,
    compensate,
    sweeper,
    holds,
    holdSweeper,
    orders,
    orderSweeper,
    sweepPlan,
    moveSuspects,
    watch,
    sale,
    audit,
  };
}
