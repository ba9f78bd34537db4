// The Prometheus registry of one service instance (its own Registry, not prom-client's global one, so
// several instances in one process — the tests — never collide). Counters the call path bumps live here;
// figures other components already keep (DeductService.stats, readiness, watch streams, settlement) are
// read when /metrics is scraped, through collect hooks, so the hot path pays nothing for them.
// Label values are bounded: methods and outcomes are enums, per-coupon gauges cover a capped set.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { FastCounter, FastHistogram } from './fast-metrics.js';

export type Transport = 'grpc' | 'connect';

/** Seconds: from well under a millisecond (a Redis script) to a call that waited seconds. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export class Metrics {
  readonly registry = new Registry();

  readonly rpcCalls = new FastCounter(
    'shardstock_rpc_requests_total',
    'Finished RPCs by transport, method and outcome (a Deduct/Compensate outcome, replayed, ok, or the status code in snake case)',
    ['transport', 'method', 'outcome'],
    this.registry,
  );

  readonly rpcDuration = new FastHistogram(
    'shardstock_rpc_duration_seconds',
    'Unary RPC handling time by transport and method (from the handler being called to its answer)',
    ['transport', 'method'],
    LATENCY_BUCKETS,
    this.registry,
  );

  readonly watchStreams = new Gauge({
    name: 'shardstock_watch_streams_open',
    help: 'Open WatchStock streams by transport',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });

  readonly watchMessages = new FastCounter(
    'shardstock_watch_messages_total',
    'Levels sent on WatchStock streams by transport',
    ['transport'],
    this.registry,
  );

  readonly redisDuration = new FastHistogram(
    'shardstock_redis_op_duration_seconds',
    'Redis Cluster operations by op (Lua scripts: deduct, compensate, moveOut, ackMove, credit, initShard; reads: probe, readRequest, ...), replica ack included',
    ['op'],
    LATENCY_BUCKETS,
    this.registry,
  );

  readonly shardBatchSize = new FastHistogram(
    'shardstock_shard_batch_size',
    'Requests per group-commit Lua call on one shard (Deducts, Compensates and Reserves that arrived together)',
    [],
    [1, 2, 4, 8, 16, 32, 64, 128, 256],
    this.registry,
  );
  readonly recordReadBatchSize = new FastHistogram(
    'shardstock_record_read_batch_size',
    "Request records read per Lua call on one shard (the sold-out fast path's replay checks that arrived together)",
    [],
    [1, 2, 4, 8, 16, 32, 64, 128, 256],
    this.registry,
  );

  readonly redisErrors = new FastCounter(
    'shardstock_redis_op_errors_total',
    'Redis Cluster operations that failed, by op',
    ['op'],
    this.registry,
  );

  readonly refusals = new FastCounter(
    'shardstock_refusals_total',
    'Calls and connections refused, by port (grpc, http) and reason: unauthenticated, permission_denied, rate_limited, shed, stream_cap, connection_cap, first_byte_timeout, headers_timeout, request_timeout, header_too_large, bad_request, protocol_error, keepalive_timeout',
    ['port', 'reason'],
    this.registry,
  );

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** A counter whose value is read from elsewhere at scrape time (monotonic figures kept by a component). */
  counterFrom(name: string, help: string, read: () => number): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  /** A gauge read at scrape time. */
  gaugeFrom(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** A labelled gauge read at scrape time: one sample per [labelValue, value] returned. */
  labelledGaugeFrom(name: string, help: string, label: string, read: () => Iterable<[string, number]>): void {
    new Gauge({
      name,
      help,
      labelNames: [label],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [l, v] of read()) this.set({ [label]: l }, v);
      },
    });
  }

  /** A labelled counter read at scrape time (monotonic figures kept by a component, one per label value). */
  labelledCounterFrom(name: string, help: string, label: string, read: () => Iterable<[string, number]>): void {
    new Counter({
      name,
      help,
      labelNames: [label],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [l, v] of read()) this.inc({ [label]: l }, v);
      },
    });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
