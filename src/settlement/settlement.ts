// The settlement pipeline of one service instance, over adapters the composition root builds
// (src/app/domain.ts), running the workers its options ask for: relay (outbox -> JetStream), settle
// (JetStream -> MySQL), reconcile (periodic drift check). The in-flight counter and Reconcile work whether or
// not this instance runs any worker.
import type { NatsConnection } from 'nats';
import { Periodic } from '../app/periodic.js';
import type { Config } from '../config.js';
import type { RecoveryRepository } from '../db/recovery-repository.js';
import type { Coupon, StockSignals, StockStore } from '../domain/ports.js';
import { CouponRecoveryService } from '../recovery/coupon-recovery.js';
import { RepairScheduler } from '../recovery/repair-scheduler.js';
import type { RedisRecoveryStore } from '../redis/recovery-store.js';
import { backgroundErrors, type Logger } from '../util/logger.js';
import {
  ensureSettlementStream,
  restoreSettlementStream,
  type SettlementStreamReader,
  settlementNames,
  type SettlementNames,
} from './jetstream.js';
import { InFlight } from './reconcile/in-flight.js';
import { LostEvents } from './reconcile/lost-events.js';
import { PeriodicReconciler, Reconciler } from './reconcile/reconciler.js';
import type { OutboxStreams } from './relay/outbox.js';
import type { OutboxWrites } from './relay/outbox-writes.js';
import { type EventPublisher, Relay } from './relay/relay.js';
import type { FastSettle } from './settle/fast-settle.js';
import type { LedgerStore } from './settle/ledger-store.js';
import { OrphanRepair } from './settle/orphan-repair.js';
import type { RedisRefusalStore } from './settle/refusal-store.js';
import { Settler } from './settle/settler.js';
import { newSettlementStats, type SettlementStats } from './stats.js';

/** The adapters settlement works through, built by the composition root (src/app/domain.ts). */
export interface SettlementDeps {
  /** MySQL: ledger, coupon rows, anomalies. */
  ledger: LedgerStore;
  /** MySQL: the settler's fast path for batches it settles whole. */
  fastSettle?: FastSettle | undefined;
  /** Redis: the shards' outbox streams. */
  outbox: OutboxStreams;
  /** JetStream: what is still unsettled. */
  stream: SettlementStreamReader;
  /** JetStream: where the relay stores events. */
  publisher: EventPublisher;
  /** Redis: marks deductions MySQL refused. */
  refusals: RedisRefusalStore;
  recoveryRepo: RecoveryRepository;
  recoveryStore: RedisRecoveryStore;
  /** What a recovery needs of the stock store: pending moves, and preheating a coupon CreateCoupon left half done. */
  stock: Pick<StockStore, 'pendingMoves' | 'initShard'>;
  /** Told when a recovery put units (back) on sale: instances drop their sold-out flags. */
  signals: Pick<StockSignals, 'stockReturned'>;
  /** The stream's set-up, the settler's consumer, orphan repair. */
  nats: NatsConnection;
  log: Logger;
  /** Outbox writes made on this instance, which the relay reads at once (relay/outbox-writes.ts). */
  outboxWrites?: OutboxWrites | undefined;
}

/** The settings settlement reads. */
export type SettlementOptions = Pick<
  Config,
  | 'namespace'
  | 'instanceId'
  | 'idempotencyWindowS'
  | 'workers'
  | 'settleBatch'
  | 'settleConcurrency'
  | 'settlePerCoupon'
  | 'relayInFlight'
  | 'settleMaxDeliver'
  | 'relayBatch'
  | 'relayClaimIdleMs'
  | 'sweepIntervalMs'
  | 'reconcileIntervalMs'
>;

export interface SettlementWorkersDeps {
  /** Coupons this instance serves (its catalog). */
  activeCoupons(): Coupon[];
}

/** Coupons created or settled within this window are checked for outbox entries nobody relays. */
const DISCOVER_RECENT_MS = 24 * 3600 * 1000;
const DISCOVER_PAGE = 200;

export class Settlement {
  readonly names: SettlementNames;
  readonly stats: SettlementStats = newSettlementStats();
  readonly ledger: LedgerStore;
  readonly outbox: OutboxStreams;
  readonly stream: SettlementStreamReader;
  readonly inFlight: InFlight;
  readonly reconciler: Reconciler;
  readonly recovery: CouponRecoveryService;
  readonly repairs: RepairScheduler;
  relay: Relay | undefined;
  settler: Settler | undefined;
  periodicReconciler: PeriodicReconciler | undefined;
  private readonly periodic: Periodic[] = [];
  private pageCursor = '';

  constructor(
    private readonly d: SettlementDeps,
    private readonly options: Readonly<SettlementOptions>,
  ) {
    this.names = settlementNames(options.namespace);
    this.ledger = d.ledger;
    this.outbox = d.outbox;
    this.stream = d.stream;
    this.inFlight = new InFlight(this.ledger, this.outbox, this.stream);
    this.recovery = new CouponRecoveryService(
      {
        repo: this.ledger,
        recoveryRepo: d.recoveryRepo,
        store: d.recoveryStore,
        stock: d.stock,
        inFlight: this.inFlight,
        ledger: this.ledger,
        signals: d.signals,
        log: d.log,
      },
      { instanceId: options.instanceId, idempotencyWindowS: options.idempotencyWindowS },
    );
    this.repairs = new RepairScheduler(this.recovery, 500, d.log);
    const lost = new LostEvents(d.recoveryStore, this.inFlight, this.ledger, d.publisher, d.log);
    this.reconciler = new Reconciler(this.ledger, this.inFlight, this.recovery, lost);
  }

  async start(w: SettlementWorkersDeps): Promise<void> {
    const config = this.options;
    const { log } = this.d;
    const onError = backgroundErrors(log);
    if (config.workers.has('relay') || config.workers.has('settle')) {
      const streamOptions = { maxAckPending: Math.max(20_000, config.settleBatch * 8) };
      await ensureSettlementStream(this.d.nats, this.names, streamOptions);
      // Made once at start, the stream stayed gone when NATS came back on an empty store: every publish failed
      // and the outbox grew until the instance restarted (test/jetstream-loss.test.ts).
      this.periodic.push(
        new Periodic(
          'settlement-stream',
          Math.max(1000, config.sweepIntervalMs),
          async () => {
            const missing = await restoreSettlementStream(this.d.nats, this.names, streamOptions);
            if (missing)
              log.error(
                { stream: this.names.stream, missing },
                'settlement: the JetStream stream or its consumer was gone and was created again; events it held are lost (Reconcile shows them as drift)',
              );
          },
          onError,
        ).start(),
      );
    }
    if (config.workers.has('relay')) {
      this.relay = new Relay(
        this.outbox,
        this.d.publisher,
        { active: w.activeCoupons, discover: () => this.discover() },
        this.stats.relay,
        {
          batch: config.relayBatch,
          inFlight: config.relayInFlight,
          claimIdleMs: config.relayClaimIdleMs,
          sweepIntervalMs: config.sweepIntervalMs,
          nudges: this.d.outboxWrites,
        },
        log,
      ).start();
    }
    if (config.workers.has('settle')) {
      const js = this.d.nats.jetstream();
      this.settler = new Settler(
        {
          consumer: () => js.consumers.get(this.names.stream, this.names.durable),
          ledger: this.ledger,
          fast: this.d.fastSettle,
          refusals: this.d.refusals,
          repair: (couponId, why) => this.repairs.request(couponId, why),
          compensationsInFlight: (coupon) => this.inFlight.compensationsInFlight(coupon),
          stats: this.stats.settle,
          log,
        },
        {
          batch: config.settleBatch,
          maxDeliver: config.settleMaxDeliver,
          concurrency: config.settleConcurrency,
          perCoupon: config.settlePerCoupon,
        },
      ).start();
      const repair = new OrphanRepair(this.d.nats, this.names, this.settler, config.settleMaxDeliver, log);
      this.periodic.push(
        new Periodic(
          'settlement-orphans',
          Math.max(5000, config.sweepIntervalMs * 5),
          async () => void (await repair.runOnce()),
          onError,
        ).start(),
      );
    }
    if (config.workers.size > 0) {
      this.periodic.push(
        new Periodic(
          'settlement-pending',
          Math.max(1000, config.sweepIntervalMs),
          async () => {
            const t = await this.stream.total();
            this.stats.settle.jetstreamPending = t.messages;
            this.stats.settle.oldestUnsettledMs = t.oldestMs;
          },
          onError,
        ).start(),
      );
    }
    if (config.workers.has('reconcile') && config.reconcileIntervalMs > 0) {
      this.periodicReconciler = new PeriodicReconciler(this.reconciler, w.activeCoupons, this.stats.reconcile, 2, log);
      const p = this.periodicReconciler;
      this.periodic.push(new Periodic('reconcile', config.reconcileIntervalMs, () => p.runOnce(), onError).start());
    }
  }

  /** The pipeline's gauges for a metrics exporter (shape of src/observability/settlement-metrics.ts). Relay
   * figures cover the shards this instance relays; the rest is refreshed every sweep interval. */
  figures() {
    let driftUnits = 0;
    let inconsistent = 0;
    for (const d of this.stats.reconcile.lastDrift.values()) {
      driftUnits += Math.abs(d.ledgerDrift) + Math.abs(d.redisDrift);
      if (d.consecutive > 0) inconsistent++;
    }
    return {
      outboxBacklog: this.stats.relay.backlogTotal,
      relayLagSeconds: this.stats.relay.lagMs / 1000,
      settleLagSeconds: this.stats.settle.oldestUnsettledMs / 1000,
      jetstreamPending: this.stats.settle.jetstreamPending,
      reconcileDriftUnits: driftUnits,
      reconcileInconsistent: inconsistent,
      anomalies: this.stats.settle.anomalies,
      oversoldUnits: this.stats.settle.oversoldUnits,
      settleFastBatches: this.stats.settle.fastBatches,
      settleUnknownCommits: this.stats.settle.unknownOutcomes,
      recoveries: this.recovery.stats.recoveries,
      recoveryRebuiltShards: this.recovery.stats.rebuiltShards,
      recoveryLoadedUnits: this.recovery.stats.loadedUnits,
      recoveryLoweredUnits: this.recovery.stats.loweredUnits,
      recoveryRestoredUnits: this.recovery.stats.restoredUnits,
      recoveryLastPausedSeconds: this.recovery.stats.lastPausedMs / 1000,
    };
  }

  /** Recently created/settled coupons plus the next page of all coupons (the walk wraps around). */
  private async discover(): Promise<Coupon[]> {
    const recent = await this.ledger.recentCoupons(Date.now() - DISCOVER_RECENT_MS, 1000);
    const page = await this.ledger.couponPage(this.pageCursor, DISCOVER_PAGE);
    this.pageCursor = page.length < DISCOVER_PAGE ? '' : page[page.length - 1]!.id;
    return [...recent, ...page];
  }

  /** Stops the workers; each finishes the batch it is on (acks included) first. */
  async stop(): Promise<void> {
    this.repairs.stop();
    await Promise.all([this.relay?.stop(), this.settler?.stop(), ...this.periodic.map((p) => p.stop())]);
  }
}
