// Every setting the service reads, in one typed place. Read once at start-up, validated, frozen;
// tests build their own with `loadConfig({ ...overrides })` instead of touching process.env.

export type AckLevel = 'replica' | 'leader';

export interface Config {
  /** SHARDSTOCK_GRPC_ADDR — host:port of the grpc-js server. Default 127.0.0.1:50051. */
  grpcAddr: string;
  /** SHARDSTOCK_HTTP_ADDR — host:port of the Connect / gRPC-Web / JSON server. Default 127.0.0.1:8080. */
  httpAddr: string;
  /** SHARDSTOCK_REDIS_NODES — comma-separated Redis Cluster seed nodes. Default 127.0.0.1:7001..7003. */
  redisNodes: { host: string; port: number }[];
  /** SHARDSTOCK_REDIS_PASSWORD — Redis AUTH password. Default none. */
  redisPassword: string | undefined;
  /** SHARDSTOCK_MYSQL_URL — MySQL/MariaDB URL; the database is created if missing. Default mysql://root@127.0.0.1:3306/shardstock. */
  mysqlUrl: string;
  /** SHARDSTOCK_NATS_URL — NATS server(s), comma-separated. Default nats://127.0.0.1:4222. */
  natsUrl: string;
  /** SHARDSTOCK_NAMESPACE — prefix of Redis keys, the JetStream stream/consumers and NATS subjects, so several deployments (or test runs) share servers. Default shardstock. */
  namespace: string;
  /** SHARDSTOCK_DEFAULT_SHARDS — shard count when CreateCoupon says 0. Default 16. */
  defaultShards: number;
  /** SHARDSTOCK_MAX_QUANTITY — the largest quantity one Deduct may ask for. Default 100. */
  maxQuantity: number;
  /** SHARDSTOCK_IDEMPOTENCY_WINDOW_S — how long a Deduct's request_id is remembered. Default 86400 (24 h). */
  idempotencyWindowS: number;
  /** SHARDSTOCK_SOLD_OUT_TTL_MS — how long an instance trusts its own "sold out" flag before asking Redis again (NATS tells it sooner). Default 2000. */
  soldOutTtlMs: number;
  /** SHARDSTOCK_ACK_LEVEL — `replica` (reply after the write reached a replica, WAIT) or `leader`. Default replica. */
  ackLevel: AckLevel;
  /** SHARDSTOCK_WAIT_TIMEOUT_MS — how long a `replica` ack waits for the replica before the call fails UNAVAILABLE. Default 200. */
  waitTimeoutMs: number;
  /** SHARDSTOCK_WORKERS — background roles this instance runs: relay, settle, sweep, reconcile (comma-separated, or `none`). Default all. */
  workers: Set<'relay' | 'settle' | 'sweep' | 'reconcile'>;
  /** SHARDSTOCK_RELAY_BATCH — outbox events read and published per batch. Default 1000. */
  relayBatch: number;
  /** SHARDSTOCK_SETTLE_BATCH — JetStream messages applied to MySQL per batch. Default 1000. */
  settleBatch: number;
  /** SHARDSTOCK_SETTLE_MAX_DELIVER — deliveries of one message before it becomes an anomaly. Default 5. */
  settleMaxDeliver: number;
  /** SHARDSTOCK_SWEEP_INTERVAL_MS — how often stranded fallback moves and outbox streams are swept. Default 2000. */
  sweepIntervalMs: number;
  /** SHARDSTOCK_RECONCILE_INTERVAL_MS — how often active coupons are reconciled; 0 turns it off. Default 30000. */
  reconcileIntervalMs: number;
  /** SHARDSTOCK_WATCH_MIN_INTERVAL_MS — WatchStock coalescing floor; also the default. Default 100. */
  watchMinIntervalMs: number;
  /** SHARDSTOCK_SHUTDOWN_GRACE_MS — how long SIGTERM waits for in-flight calls. Default 10000. */
  shutdownGraceMs: number;
  /** SHARDSTOCK_MAX_MESSAGE_BYTES — largest request message accepted on either port. Default 65536. */
  maxMessageBytes: number;
  /** SHARDSTOCK_LOG_LEVEL — pino level. Default info. */
  logLevel: string;
  /** SHARDSTOCK_INSTANCE_ID — this instance's name in consumer groups. Default host-pid. */
  instanceId: string;
}

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new ConfigError(`${name} must be an integer in ${min}..${max}, got ${JSON.stringify(raw)}`);
  }
  return v;
}

function str(env: Env, name: string, def: string): string {
  const raw = env[name];
  return raw === undefined || raw === '' ? def : raw;
}

function hostPort(name: string, raw: string): { host: string; port: number } {
  const i = raw.lastIndexOf(':');
  const port = Number(raw.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`${name} must be host:port, got ${JSON.stringify(raw)}`);
  }
  return { host: raw.slice(0, i), port };
}

const WORKERS = ['relay', 'settle', 'sweep', 'reconcile'] as const;

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const grpcAddr = str(env, 'SHARDSTOCK_GRPC_ADDR', '127.0.0.1:50051');
  const httpAddr = str(env, 'SHARDSTOCK_HTTP_ADDR', '127.0.0.1:8080');
  hostPort('SHARDSTOCK_GRPC_ADDR', grpcAddr);
  hostPort('SHARDSTOCK_HTTP_ADDR', httpAddr);
  const redisNodes = str(env, 'SHARDSTOCK_REDIS_NODES', '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003')
    .split(',')
    .map((s) => hostPort('SHARDSTOCK_REDIS_NODES', s.trim()));
  const ackLevel = str(env, 'SHARDSTOCK_ACK_LEVEL', 'replica');
  if (ackLevel !== 'replica' && ackLevel !== 'leader') {
    throw new ConfigError(`SHARDSTOCK_ACK_LEVEL must be replica or leader, got ${JSON.stringify(ackLevel)}`);
  }
  const workersRaw = str(env, 'SHARDSTOCK_WORKERS', WORKERS.join(','));
  const workers = new Set<(typeof WORKERS)[number]>();
  if (workersRaw !== 'none') {
    for (const w of workersRaw.split(',').map((s) => s.trim())) {
      if (!(WORKERS as readonly string[]).includes(w)) {
        throw new ConfigError(`SHARDSTOCK_WORKERS: unknown role ${JSON.stringify(w)} (known: ${WORKERS.join(', ')}, none)`);
      }
      workers.add(w as (typeof WORKERS)[number]);
    }
  }
  const namespace = str(env, 'SHARDSTOCK_NAMESPACE', 'shardstock');
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(namespace)) {
    throw new ConfigError('SHARDSTOCK_NAMESPACE must be 1..32 characters of [A-Za-z0-9_-]');
  }
  return Object.freeze({
    grpcAddr,
    httpAddr,
    redisNodes,
    redisPassword: env.SHARDSTOCK_REDIS_PASSWORD || undefined,
    mysqlUrl: str(env, 'SHARDSTOCK_MYSQL_URL', 'mysql://root@127.0.0.1:3306/shardstock'),
    natsUrl: str(env, 'SHARDSTOCK_NATS_URL', 'nats://127.0.0.1:4222'),
    namespace,
    defaultShards: int(env, 'SHARDSTOCK_DEFAULT_SHARDS', 16, 1, 1024),
    maxQuantity: int(env, 'SHARDSTOCK_MAX_QUANTITY', 100, 1, 1_000_000),
    idempotencyWindowS: int(env, 'SHARDSTOCK_IDEMPOTENCY_WINDOW_S', 86_400, 1, 90 * 86_400),
    soldOutTtlMs: int(env, 'SHARDSTOCK_SOLD_OUT_TTL_MS', 2000, 0, 600_000),
    ackLevel,
    waitTimeoutMs: int(env, 'SHARDSTOCK_WAIT_TIMEOUT_MS', 200, 1, 60_000),
    workers,
    relayBatch: int(env, 'SHARDSTOCK_RELAY_BATCH', 1000, 1, 10_000),
    settleBatch: int(env, 'SHARDSTOCK_SETTLE_BATCH', 1000, 1, 10_000),
    settleMaxDeliver: int(env, 'SHARDSTOCK_SETTLE_MAX_DELIVER', 5, 1, 100),
    sweepIntervalMs: int(env, 'SHARDSTOCK_SWEEP_INTERVAL_MS', 2000, 50, 600_000),
    reconcileIntervalMs: int(env, 'SHARDSTOCK_RECONCILE_INTERVAL_MS', 30_000, 0, 86_400_000),
    watchMinIntervalMs: int(env, 'SHARDSTOCK_WATCH_MIN_INTERVAL_MS', 100, 1, 60_000),
    shutdownGraceMs: int(env, 'SHARDSTOCK_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    maxMessageBytes: int(env, 'SHARDSTOCK_MAX_MESSAGE_BYTES', 65_536, 1024, 16 * 1024 * 1024),
    logLevel: str(env, 'SHARDSTOCK_LOG_LEVEL', 'info'),
    instanceId: str(env, 'SHARDSTOCK_INSTANCE_ID', `${process.env.HOSTNAME ?? 'local'}-${process.pid}`),
  });
}
