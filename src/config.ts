// Every setting the service reads, in one typed place. Read once at start-up, validated, frozen;
// tests build their own with `loadConfig({ ...overrides })` instead of touching process.env.
import { existsSync, readFileSync } from 'node:fs';
import { parseTokenEntries, tokenFileEntries, TokenFormatError, TokenRegistry, type TokenEntry } from './access/tokens.js';

export type AckLevel = 'replica' | 'leader';

/** A low-stock threshold: absolute units, or a percentage of the coupon's total stock; 0 turns it off. */
export interface LowStockThreshold {
  kind: 'units' | 'percent';
  value: number;
}

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
  /** SHARDSTOCK_NAMESPACE — prefix of Redis keys, the JetStream stream/consumers and NATS subjects, so several deployments (or test runs) share Redis and NATS servers. Give each deployment its own MySQL database: coupon rows carry no namespace, so another namespace's workers would finish this one's interrupted restocks under their own keys. Default shardstock. */
  namespace: string;
  /** SHARDSTOCK_DEFAULT_SHARDS — shard count when CreateCoupon says 0. Default 16. */
  defaultShards: number;
  /** SHARDSTOCK_MAX_QUANTITY — the largest quantity one Deduct may ask for. Default 100. */
  maxQuantity: number;
  /** SHARDSTOCK_IDEMPOTENCY_WINDOW_S — how long a Deduct's request_id is remembered. Default 86400 (24 h). */
  idempotencyWindowS: number;
  /** SHARDSTOCK_HOLD_TTL_MIN_MS — the shortest hold a Reserve or ExtendHold may ask for. Default 1000. */
  holdTtlMinMs: number;
  /** SHARDSTOCK_HOLD_TTL_MAX_MS — the longest hold a Reserve or ExtendHold may ask for: at most half the
   * idempotency window (a hold's record must outlive it), and room for an order's commit (above
   * SHARDSTOCK_ORDER_COMMIT_MARGIN_MS + 2 × SHARDSTOCK_ORDER_SWEEP_MS + 1000). Default 3600000 (1 h), or half
   * the idempotency window if that is shorter. */
  holdTtlMaxMs: number;
  /** SHARDSTOCK_HOLD_TTL_DEFAULT_MS — the hold a Reserve or ExtendHold gets with ttl_ms = 0 (between the
   * minimum and the maximum). Default 600000 (10 min), or the maximum if that is shorter. */
  holdTtlDefaultMs: number;
  /** SHARDSTOCK_HOLD_SWEEP_MS — how often every instance looks for expired holds (they are released within
   * about this much of their expiry, whichever instance made them). Default 250. */
  holdSweepMs: number;
  /** SHARDSTOCK_HOLD_FULL_PASS_MS — how often the hold sweeper's backstop looks at the shards of the coupons this
   * instance serves and of the next page of every coupon in MySQL, for holds whose index entry a crash lost.
   * Default 30000. */
  holdFullPassMs: number;
  /** SHARDSTOCK_MAX_ORDER_ITEMS — the most items one ReserveOrder or DeductOrder may list. Default 32. */
  maxOrderItems: number;
  /** SHARDSTOCK_ORDER_COMMIT_MARGIN_MS — an order is committed only while each of its holds has at least this
   * long to live (holds about to expire are extended first): time for its confirms, even by a retry or the
   * order sweeper after a crash, and room for clock skew between instances. The margin + 2 × `SHARDSTOCK_ORDER_SWEEP_MS`
   * + 1 s must fit in the longest hold (`SHARDSTOCK_HOLD_TTL_MAX_MS`, at most half the idempotency window): the
   * service refuses to start otherwise. Default 5000. */
  orderCommitMarginMs: number;
  /** SHARDSTOCK_ORDER_SWEEP_MS — how often every instance looks for orders their caller left unfinished (a
   * committed order whose confirms were cut short is finished about this long after the commit). Default 500. */
  orderSweepMs: number;
  /** SHARDSTOCK_ORDER_ABANDON_MS — an order still being taken this long after it began (its caller died) is
   * ended by the sweeper and its holds released, rather than left until they expire. Default 10000. */
  orderAbandonMs: number;
  /** SHARDSTOCK_SOLD_OUT_TTL_MS — how long an instance trusts its own "sold out" flag before asking Redis again (NATS tells it sooner). Default 2000. */
  soldOutTtlMs: number;
  /** SHARDSTOCK_ACK_LEVEL — `replica` (reply after the write reached a replica, WAIT) or `leader`. Default replica. */
  ackLevel: AckLevel;
  /** SHARDSTOCK_SHARD_BATCH_MAX — group commit: the most Deducts, Compensates and Reserves for one shard that share one Lua call (1 = every call alone). Default 64. */
  shardBatchMax: number;
  /** SHARDSTOCK_SHARD_BATCH_WAIT_US — group commit: how long the first request of a batch waits for company, µs (0 = until the end of the current event-loop turn; else rounded up to whole ms). Default 0. */
  shardBatchWaitUs: number;
  /** SHARDSTOCK_SHARD_BATCH_GAP_US — group commit under load: while requests arrive for a master fast enough that its next call would carry at least SHARDSTOCK_SHARD_BATCH_GAP_FROM anyway, that call leaves no sooner than this many µs after the previous one (ms resolution), so calls carry more requests and Redis spends less CPU per deduction, at up to this much latency (0 = off; at most 90000). Default 0. */
  shardBatchGapUs: number;
  /** SHARDSTOCK_SHARD_BATCH_GAP_FROM — the size a master's next call would have without the gap (arrival rate × the call's round trip) from which SHARDSTOCK_SHARD_BATCH_GAP_US holds it (below it, load is light and the next call leaves at once). Default 8. */
  shardBatchGapFrom: number;
  /** SHARDSTOCK_WAIT_TIMEOUT_MS — how long a `replica` ack waits for the replica before the call fails UNAVAILABLE. Default 200. */
  waitTimeoutMs: number;
  /** SHARDSTOCK_ACK_REPLICAS — how many replicas a `replica` ack waits for. Set it to the replicas per master
   *  when there are several: Redis promotes the most up-to-date replica by preference, not by rule. Default 1. */
  ackReplicas: number;
  /** SHARDSTOCK_WORKERS — background roles this instance runs: relay, settle, sweep, reconcile (comma-separated, or `none`). Default all. */
  workers: Set<'relay' | 'settle' | 'sweep' | 'reconcile'>;
  /** SHARDSTOCK_RELAY_BATCH — outbox entries read and published per batch (an entry holds one Lua call's events). Default 1000. */
  relayBatch: number;
  /** SHARDSTOCK_SETTLE_BATCH — most JetStream messages one settlement transaction applies (under a backlog; at low traffic a message settles as soon as it arrives). Default 2000. */
  settleBatch: number;
  /** SHARDSTOCK_SETTLE_CONCURRENCY — settlement transactions one instance runs at once, over all coupons. Default 4. */
  settleConcurrency: number;
  /** SHARDSTOCK_SETTLE_PER_COUPON — of those, how many may be of one coupon (they overlap their inserts and queue only for the coupon row's update and commit; 2 drained a one-coupon backlog faster than 1 with the fast path). Default 2. */
  settlePerCoupon: number;
  /** SHARDSTOCK_RELAY_IN_FLIGHT — JetStream publishes the relay keeps in flight at once, over all shards. Default 2000. */
  relayInFlight: number;
  /** SHARDSTOCK_SETTLE_MAX_DELIVER — deliveries of one message before it becomes an anomaly. Default 5. */
  settleMaxDeliver: number;
  /** SHARDSTOCK_RELAY_CLAIM_IDLE_MS — outbox entries another instance took and has not relayed for this long (it died) are taken over. Default 15000. */
  relayClaimIdleMs: number;
  /** SHARDSTOCK_SWEEP_INTERVAL_MS — how often stranded fallback moves and outbox streams are swept. Default 2000. */
  sweepIntervalMs: number;
  /** SHARDSTOCK_RECONCILE_INTERVAL_MS — how often active coupons are reconciled; 0 turns it off. Default 30000. */
  reconcileIntervalMs: number;
  /** SHARDSTOCK_WATCH_MIN_INTERVAL_MS — WatchStock coalescing floor; also the default. Default 100. */
  watchMinIntervalMs: number;
  /** SHARDSTOCK_LOW_STOCK_THRESHOLD — a low-stock event is published when a coupon's available units fall to
   *  or below this, once per crossing: `N` units or `N%` of its total stock; `0` = off. Default 10%. */
  lowStockThreshold: LowStockThreshold;
  /** SHARDSTOCK_LOW_STOCK_THRESHOLDS — per-coupon overrides, `couponId=N,couponId=N%`. Default none. */
  lowStockOverrides: ReadonlyMap<string, LowStockThreshold>;
  /** SHARDSTOCK_SHUTDOWN_GRACE_MS — how long SIGTERM waits for in-flight calls. Default 10000. */
  shutdownGraceMs: number;
  /** SHARDSTOCK_MAX_MESSAGE_BYTES — largest request message accepted on either port. Default 65536. */
  maxMessageBytes: number;
  /** SHARDSTOCK_LOG_LEVEL — pino level. Default info. */
  logLevel: string;
  /** SHARDSTOCK_INSTANCE_ID — this instance's name in consumer groups. Default host-pid. */
  instanceId: string;
  /** SHARDSTOCK_AUTH — `token`: each call needs `authorization: Bearer <token>` naming a token of
   *  SHARDSTOCK_AUTH_TOKENS / _FILE, else UNAUTHENTICATED; role `deduct` may call Deduct, Compensate, GetStock,
   *  WatchStock and the health Watch / reflection streams; role `admin` everything (else PERMISSION_DENIED).
   *  `off`: every caller may call every RPC. Unset: `off` when both ports bind loopback, otherwise start-up is
   *  refused (closed by default: say `off` explicitly to serve a network without auth). Default unset. */
  auth: 'off' | 'token';
  /** SHARDSTOCK_AUTH_TOKENS (comma-separated) and SHARDSTOCK_AUTH_TOKENS_FILE (one per line, # comments):
   *  `name:role:token` entries, token ≥ 16 characters. Only SHA-256 digests are kept. Default none. */
  authTokens: readonly TokenEntry[];
  /** SHARDSTOCK_RATE_LIMIT_RPS — calls per second per caller (its token name, else its address), answered
   *  RESOURCE_EXHAUSTED with `retry-after-ms` beyond it; 0 = off. Default 0. */
  rateLimitRps: number;
  /** SHARDSTOCK_RATE_LIMIT_BURST — calls a caller may make at once above its rate. Default = the rate. */
  rateLimitBurst: number;
  /** SHARDSTOCK_MAX_IN_FLIGHT — unary calls served at once per instance; one more is shed with UNAVAILABLE and
   *  `retry-after-ms` instead of queueing. 0 = unbounded. Default 4096. */
  maxInFlight: number;
  /** SHARDSTOCK_GRPC_TLS_CERT + SHARDSTOCK_GRPC_TLS_KEY (PEM files): serve the gRPC port over TLS;
   *  SHARDSTOCK_GRPC_TLS_CLIENT_CA: also require client certificates signed by it (mTLS). Default plaintext. */
  grpcTls: { certFile: string; keyFile: string; clientCaFile: string | undefined } | undefined;
  /** SHARDSTOCK_GRPC_TLS_RELOAD_MS — how often the gRPC port re-reads its certificate, key and client CA
   *  files, so a renewed certificate (cert-manager rewriting a mounted secret) is served without a restart;
   *  0 = read once at start-up. Replace the files atomically (a Kubernetes secret volume does): a certificate
   *  read without its matching key is refused, and new connections wait for the next read. Default 0. */
  grpcTlsReloadMs: number;
  /** SHARDSTOCK_REDIS_USERNAME — Redis ACL user, with SHARDSTOCK_REDIS_PASSWORD. Default none (`default` user). */
  redisUsername: string | undefined;
  /** SHARDSTOCK_REDIS_TLS=on: connect to every cluster node over TLS; SHARDSTOCK_REDIS_TLS_CA (verify the
   *  servers; default the system CAs), SHARDSTOCK_REDIS_TLS_CERT + _KEY (client certificate). Default off. */
  redisTls: TlsFiles | undefined;
  /** SHARDSTOCK_MYSQL_TLS=on: TLS to MySQL, verifying the server; SHARDSTOCK_MYSQL_TLS_CA, _CERT + _KEY as for
   *  Redis. The password goes in SHARDSTOCK_MYSQL_URL. Default off. */
  mysqlTls: TlsFiles | undefined;
  /** SHARDSTOCK_MAX_CONNECTIONS — open TCP connections per port (gRPC and HTTP each); one more is closed at
   *  accept and counted as refused (`connection_cap`). Default 10000. */
  maxConnections: number;
  /** SHARDSTOCK_FIRST_BYTE_TIMEOUT_MS — a connection that sends no byte for this long after connecting is
   *  closed (both ports). Default 5000. */
  firstByteTimeoutMs: number;
  /** SHARDSTOCK_HEADERS_TIMEOUT_MS — the first request's headers must be complete this long after the
   *  connection (both ports; HTTP/1.1 keep-alive: after the previous request went idle, plus the idle timeout),
   *  else the connection is closed (`headers_timeout`). Default 10000. */
  headersTimeoutMs: number;
  /** SHARDSTOCK_REQUEST_TIMEOUT_MS — a request must have arrived in full (headers and message) this long after
   *  it started, else it is cancelled (`request_timeout`), on both ports; answers and server streams may take
   *  longer. Default 30000. */
  requestTimeoutMs: number;
  /** SHARDSTOCK_IDLE_TIMEOUT_MS — a connection with no call in progress for this long is closed: HTTP/1.1
   *  keep-alive, HTTP/2 sessions on the HTTP port, and grpc-js `max_connection_idle_ms`. Default 65000 (above
   *  the usual 60 s load-balancer idle timeout, so the balancer closes first). */
  idleTimeoutMs: number;
  /** SHARDSTOCK_MAX_STREAMS_PER_CONNECTION — concurrent HTTP/2 streams per connection on both ports
   *  (SETTINGS_MAX_CONCURRENT_STREAMS); a peer that keeps opening more is disconnected. Default 100. */
  maxStreamsPerConnection: number;
  /** SHARDSTOCK_MAX_HEADER_BYTES — largest request header block on the HTTP port (HTTP/1.1 answers 431,
   *  HTTP/2 refuses the stream); the gRPC port keeps Node's HTTP/2 limit of 64 KiB. Default 16384. */
  maxHeaderBytes: number;
  /** SHARDSTOCK_GRPC_KEEPALIVE_MS — HTTP/2 connections on both ports: the server pings a connection this often
   *  (on the HTTP port, while a stream such as WatchStock is open) and closes it when no answer comes within
   *  SHARDSTOCK_GRPC_KEEPALIVE_TIMEOUT_MS. Defaults 60000 and 20000. */
  grpcKeepaliveMs: number;
  grpcKeepaliveTimeoutMs: number;
  /** SHARDSTOCK_MAX_CONNECTION_AGE_MS — gRPC port: a connection is asked to go away (GOAWAY) after this long,
   *  so clients spread over new instances; SHARDSTOCK_MAX_CONNECTION_AGE_GRACE_MS later whatever is still open
   *  on it is cut. Defaults 1800000 (30 min) and 30000. */
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
  /** SHARDSTOCK_MAX_STREAMS — long-lived streams (WatchStock, health Watch, reflection) open at once per
   *  instance; one more is refused RESOURCE_EXHAUSTED (`stream_cap`). Default 10000. */
  maxStreams: number;
  /** SHARDSTOCK_MAX_STREAMS_PER_CALLER — the same per caller (token name, else peer address). Default 100. */
  maxStreamsPerCaller: number;
  /** SHARDSTOCK_MAX_STREAM_LIFETIME_MS — a WatchStock stream ends (OK) after this long; the client reconnects
   *  and lands wherever the balancer sends it. Default 1800000 (30 min). */
  maxStreamLifetimeMs: number;
  /** SHARDSTOCK_REFLECTION — `on`: gRPC server reflection is served (behind the gate when auth is on);
   *  `off` for production if clients have the proto files. Default on. */
  reflection: boolean;
  /** SHARDSTOCK_NATS_USER + SHARDSTOCK_NATS_PASSWORD, or SHARDSTOCK_NATS_TOKEN, or SHARDSTOCK_NATS_NKEY_SEED_FILE
   *  (a file holding an nkey seed), or SHARDSTOCK_NATS_CREDS_FILE (a JWT `.creds` file): how every NATS
   *  connection authenticates; one kind at most. Default none. */
  natsAuth: NatsAuth | undefined;
  /** SHARDSTOCK_NATS_TLS=on: TLS to every NATS server, verifying it; SHARDSTOCK_NATS_TLS_CA (default the
   *  system CAs), SHARDSTOCK_NATS_TLS_CERT + _KEY (client certificate) as for Redis. Default off. */
  natsTls: TlsFiles | undefined;
  /** SHARDSTOCK_FAILOVER_FENCE — `on` (default): after a slot's master changes (failover), writes to that slot
   *  are refused UNAVAILABLE with `retry-after-ms` until the new master is confirmed able to honour the ack
   *  level (docs/guarantees.md); `off`. */
  failoverFence: boolean;
}

/** One way to authenticate to NATS. */
export type NatsAuth =
  | { kind: 'user'; user: string; password: string }
  | { kind: 'token'; token: string }
  | { kind: 'nkey'; seedFile: string }
  | { kind: 'creds'; credsFile: string };

/** PEM files for a TLS client connection. */
export interface TlsFiles {
  caFile: string | undefined;
  certFile: string | undefined;
  keyFile: string | undefined;
}

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Plain decimal digits only: Number() reads blanks as 0 and takes hex, exponents and signs, none of which an
 * operator means (a blank SHARDSTOCK_MAX_IN_FLIGHT would turn shedding off). */
const DIGITS = /^[0-9]+$/;

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  const v = DIGITS.test(raw) ? Number(raw) : NaN;
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
  const digits = raw.slice(i + 1);
  const port = DIGITS.test(digits) ? Number(digits) : NaN;
  if (i <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`${name} must be host:port, got ${JSON.stringify(raw)}`);
  }
  return { host: raw.slice(0, i), port };
}

function threshold(name: string, raw: string): LowStockThreshold {
  const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(raw.trim());
  const value = m ? Number(m[1]) : NaN;
  if (!m || (m[2] === '%' ? value > 100 : !Number.isInteger(value))) {
    throw new ConfigError(`${name} must be whole units (e.g. 50) or a percentage up to 100% (e.g. 10%), got ${JSON.stringify(raw)}`);
  }
  return { kind: m[2] === '%' ? 'percent' : 'units', value };
}

function thresholdOverrides(name: string, raw: string): Map<string, LowStockThreshold> {
  const map = new Map<string, LowStockThreshold>();
  for (const part of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = part.lastIndexOf('=');
    if (eq <= 0) throw new ConfigError(`${name} must be couponId=threshold pairs, got ${JSON.stringify(part)}`);
    map.set(part.slice(0, eq), threshold(name, part.slice(eq + 1)));
  }
  return map;
}

function onOff(env: Env, name: string, def: boolean): boolean {
  const raw = str(env, name, def ? 'on' : 'off');
  if (raw !== 'on' && raw !== 'off') throw new ConfigError(`${name} must be on or off, got ${JSON.stringify(raw)}`);
  return raw === 'on';
}

function file(env: Env, name: string): string | undefined {
  const path = env[name] || undefined;
  if (path !== undefined && !existsSync(path)) throw new ConfigError(`${name}: no such file ${JSON.stringify(path)}`);
  return path;
}

function tlsFiles(env: Env, prefix: string): TlsFiles {
  const t = { caFile: file(env, `${prefix}_CA`), certFile: file(env, `${prefix}_CERT`), keyFile: file(env, `${prefix}_KEY`) };
  if ((t.certFile === undefined) !== (t.keyFile === undefined)) throw new ConfigError(`${prefix}_CERT and ${prefix}_KEY go together`);
  return t;
}

/** The token entries of SHARDSTOCK_AUTH_TOKENS and _FILE, validated (SIGHUP re-reads them: src/main.ts). */
export function authTokens(env: Env): TokenEntry[] {
  const entries: TokenEntry[] = [];
  try {
    const inline = str(env, 'SHARDSTOCK_AUTH_TOKENS', '');
    if (inline)
      entries.push(
        ...parseTokenEntries(
          inline
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
          'SHARDSTOCK_AUTH_TOKENS',
        ),
      );
    const path = file(env, 'SHARDSTOCK_AUTH_TOKENS_FILE');
    if (path) entries.push(...parseTokenEntries(tokenFileEntries(readFileSync(path, 'utf8')), 'SHARDSTOCK_AUTH_TOKENS_FILE'));
    new TokenRegistry(entries);
  } catch (err) {
    if (err instanceof TokenFormatError) throw new ConfigError(err.message);
    throw err;
  }
  return entries;
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this host only. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\.\d+\.\d+\.\d+$/.test(h);
}

function security(env: Env, binds: string[]) {
  const explicit = env.SHARDSTOCK_AUTH || undefined;
  const auth = explicit ?? 'off';
  if (auth !== 'off' && auth !== 'token') throw new ConfigError(`SHARDSTOCK_AUTH must be off or token, got ${JSON.stringify(auth)}`);
  const exposed = binds.filter((b) => !isLoopback(b.slice(0, b.lastIndexOf(':'))));
  if (explicit === undefined && exposed.length > 0) {
    throw new ConfigError(
      `refusing to serve ${exposed.join(' and ')} without authentication: set SHARDSTOCK_AUTH=token with SHARDSTOCK_AUTH_TOKENS(_FILE), ` +
        'or SHARDSTOCK_AUTH=off to serve without it on purpose (loopback addresses need neither)',
    );
  }
  const tokens = authTokens(env);
  if (auth === 'token' && tokens.length === 0) {
    throw new ConfigError('SHARDSTOCK_AUTH=token needs SHARDSTOCK_AUTH_TOKENS or SHARDSTOCK_AUTH_TOKENS_FILE');
  }
  const rateLimitRps = int(env, 'SHARDSTOCK_RATE_LIMIT_RPS', 0, 0, 10_000_000);
  const grpc = tlsFiles(env, 'SHARDSTOCK_GRPC_TLS');
  if (grpc.caFile !== undefined)
    throw new ConfigError('SHARDSTOCK_GRPC_TLS_CA is not a setting: use SHARDSTOCK_GRPC_TLS_CLIENT_CA for mTLS');
  const clientCaFile = file(env, 'SHARDSTOCK_GRPC_TLS_CLIENT_CA');
  if (clientCaFile && !grpc.certFile) throw new ConfigError('SHARDSTOCK_GRPC_TLS_CLIENT_CA needs SHARDSTOCK_GRPC_TLS_CERT and _KEY');
  return {
    auth: auth as 'off' | 'token',
    authTokens: Object.freeze(tokens),
    rateLimitRps,
    rateLimitBurst: int(env, 'SHARDSTOCK_RATE_LIMIT_BURST', Math.max(1, rateLimitRps), 1, 10_000_000),
    maxInFlight: int(env, 'SHARDSTOCK_MAX_IN_FLIGHT', 4096, 0, 1_000_000),
    grpcTls: grpc.certFile && grpc.keyFile ? { certFile: grpc.certFile, keyFile: grpc.keyFile, clientCaFile } : undefined,
    grpcTlsReloadMs: int(env, 'SHARDSTOCK_GRPC_TLS_RELOAD_MS', 0, 0, 86_400_000),
    redisUsername: env.SHARDSTOCK_REDIS_USERNAME || undefined,
    redisTls: onOff(env, 'SHARDSTOCK_REDIS_TLS', false) ? tlsFiles(env, 'SHARDSTOCK_REDIS_TLS') : undefined,
    mysqlTls: onOff(env, 'SHARDSTOCK_MYSQL_TLS', false) ? tlsFiles(env, 'SHARDSTOCK_MYSQL_TLS') : undefined,
    failoverFence: onOff(env, 'SHARDSTOCK_FAILOVER_FENCE', true),
  };
}

function natsAuth(env: Env): NatsAuth | undefined {
  const user = env.SHARDSTOCK_NATS_USER || undefined;
  const password = env.SHARDSTOCK_NATS_PASSWORD || undefined;
  const token = env.SHARDSTOCK_NATS_TOKEN || undefined;
  const seedFile = file(env, 'SHARDSTOCK_NATS_NKEY_SEED_FILE');
  const credsFile = file(env, 'SHARDSTOCK_NATS_CREDS_FILE');
  if ((user === undefined) !== (password === undefined))
    throw new ConfigError('SHARDSTOCK_NATS_USER and SHARDSTOCK_NATS_PASSWORD go together');
  const kinds: NatsAuth[] = [];
  if (user && password) kinds.push({ kind: 'user', user, password });
  if (token) kinds.push({ kind: 'token', token });
  if (seedFile) kinds.push({ kind: 'nkey', seedFile });
  if (credsFile) kinds.push({ kind: 'creds', credsFile });
  if (kinds.length > 1) {
    throw new ConfigError(
      'NATS authentication: set one of user+password, SHARDSTOCK_NATS_TOKEN, _NKEY_SEED_FILE or _CREDS_FILE, not several',
    );
  }
  return kinds[0];
}

function natsTls(env: Env): TlsFiles | undefined {
  const files = tlsFiles(env, 'SHARDSTOCK_NATS_TLS');
  return onOff(env, 'SHARDSTOCK_NATS_TLS', false) ? files : undefined;
}

function network(env: Env) {
  return {
    maxConnections: int(env, 'SHARDSTOCK_MAX_CONNECTIONS', 10_000, 1, 1_000_000),
    firstByteTimeoutMs: int(env, 'SHARDSTOCK_FIRST_BYTE_TIMEOUT_MS', 5000, 100, 600_000),
    headersTimeoutMs: int(env, 'SHARDSTOCK_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    requestTimeoutMs: int(env, 'SHARDSTOCK_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000),
    idleTimeoutMs: int(env, 'SHARDSTOCK_IDLE_TIMEOUT_MS', 65_000, 100, 86_400_000),
    maxStreamsPerConnection: int(env, 'SHARDSTOCK_MAX_STREAMS_PER_CONNECTION', 100, 1, 10_000),
    maxHeaderBytes: int(env, 'SHARDSTOCK_MAX_HEADER_BYTES', 16_384, 1024, 1_048_576),
    grpcKeepaliveMs: int(env, 'SHARDSTOCK_GRPC_KEEPALIVE_MS', 60_000, 1000, 86_400_000),
    grpcKeepaliveTimeoutMs: int(env, 'SHARDSTOCK_GRPC_KEEPALIVE_TIMEOUT_MS', 20_000, 100, 600_000),
    maxConnectionAgeMs: int(env, 'SHARDSTOCK_MAX_CONNECTION_AGE_MS', 1_800_000, 1000, 86_400_000 * 7),
    maxConnectionAgeGraceMs: int(env, 'SHARDSTOCK_MAX_CONNECTION_AGE_GRACE_MS', 30_000, 0, 86_400_000),
    maxStreams: int(env, 'SHARDSTOCK_MAX_STREAMS', 10_000, 1, 1_000_000),
    maxStreamsPerCaller: int(env, 'SHARDSTOCK_MAX_STREAMS_PER_CALLER', 100, 1, 1_000_000),
    maxStreamLifetimeMs: int(env, 'SHARDSTOCK_MAX_STREAM_LIFETIME_MS', 1_800_000, 1000, 86_400_000 * 7),
    reflection: onOff(env, 'SHARDSTOCK_REFLECTION', true),
  };
}

/** Hold lengths, checked against what depends on them here rather than clamped later: the hold service and
 * the order service must see the same bounds (a clamp only the hold service applied refused every order's
 * holds with a ttl_ms its caller never sent). Whether an order's commit fits in the longest hold: orderTiming. */
function holdTtl(env: Env, windowS: number): Pick<Config, 'holdTtlMinMs' | 'holdTtlMaxMs' | 'holdTtlDefaultMs'> {
  // A hold's record lives in the record buckets, kept at least one window: a hold lasts at most half of it.
  const recordBoundMs = windowS * 500;
  const minMs = int(env, 'SHARDSTOCK_HOLD_TTL_MIN_MS', 1000, 1, 86_400_000);
  const maxMs = int(env, 'SHARDSTOCK_HOLD_TTL_MAX_MS', Math.min(3_600_000, recordBoundMs), 1, 7 * 86_400_000);
  const defaultMs = int(env, 'SHARDSTOCK_HOLD_TTL_DEFAULT_MS', Math.min(600_000, maxMs), 1, 7 * 86_400_000);
  if (!(minMs <= defaultMs && defaultMs <= maxMs))
    throw new ConfigError(
      `SHARDSTOCK_HOLD_TTL_MIN_MS <= SHARDSTOCK_HOLD_TTL_DEFAULT_MS <= SHARDSTOCK_HOLD_TTL_MAX_MS must hold, got ${minMs}, ${defaultMs}, ${maxMs}`,
    );
  if (maxMs > recordBoundMs)
    throw new ConfigError(
      `SHARDSTOCK_HOLD_TTL_MAX_MS (${maxMs}) must be at most half of SHARDSTOCK_IDEMPOTENCY_WINDOW_S (${windowS} s): a hold's record must outlive it`,
    );
  return { holdTtlMinMs: minMs, holdTtlMaxMs: maxMs, holdTtlDefaultMs: defaultMs };
}

/** The connection limits both transports apply. */

export function networkLimits(c: Readonly<Config>) {
  return {
    maxConnections: c.maxConnections,
    firstByteTimeoutMs: c.firstByteTimeoutMs,
    headersTimeoutMs: c.headersTimeoutMs,
    idleTimeoutMs: c.idleTimeoutMs,
    requestTimeoutMs: c.requestTimeoutMs,
    maxStreamsPerConnection: c.maxStreamsPerConnection,
    maxHeaderBytes: c.maxHeaderBytes,
    keepaliveMs: c.grpcKeepaliveMs,
    keepaliveTimeoutMs: c.grpcKeepaliveTimeoutMs,
  };
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
  const idempotencyWindowS = int(env, 'SHARDSTOCK_IDEMPOTENCY_WINDOW_S', 86_400, 1, 90 * 86_400);
  const orderCommitMarginMs = int(env, 'SHARDSTOCK_ORDER_COMMIT_MARGIN_MS', 5000, 100, 600_000);
  const orderSweepMs = int(env, 'SHARDSTOCK_ORDER_SWEEP_MS', 500, 10, 60_000);
  const namespace = str(env, 'SHARDSTOCK_NAMESPACE', 'shardstock');
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(namespace)) {
    throw new ConfigError('SHARDSTOCK_NAMESPACE must be 1..32 characters of [A-Za-z0-9_-]');
  }
  const config = Object.freeze({
    grpcAddr,
    httpAddr,
    redisNodes,
    redisPassword: env.SHARDSTOCK_REDIS_PASSWORD || undefined,
    mysqlUrl: str(env, 'SHARDSTOCK_MYSQL_URL', 'mysql://root@127.0.0.1:3306/shardstock'),
    natsUrl: str(env, 'SHARDSTOCK_NATS_URL', 'nats://127.0.0.1:4222'),
    namespace,
    defaultShards: int(env, 'SHARDSTOCK_DEFAULT_SHARDS', 16, 1, 1024),
    maxQuantity: int(env, 'SHARDSTOCK_MAX_QUANTITY', 100, 1, 1_000_000),
    idempotencyWindowS,
    ...holdTtl(env, idempotencyWindowS),
    holdSweepMs: int(env, 'SHARDSTOCK_HOLD_SWEEP_MS', 250, 10, 60_000),
    holdFullPassMs: int(env, 'SHARDSTOCK_HOLD_FULL_PASS_MS', 30_000, 100, 3_600_000),
    maxOrderItems: int(env, 'SHARDSTOCK_MAX_ORDER_ITEMS', 32, 1, 1000),
    orderCommitMarginMs,
    orderSweepMs,
    orderAbandonMs: int(env, 'SHARDSTOCK_ORDER_ABANDON_MS', 10_000, 100, 3_600_000),
    soldOutTtlMs: int(env, 'SHARDSTOCK_SOLD_OUT_TTL_MS', 2000, 0, 600_000),
    ackLevel,
    shardBatchMax: int(env, 'SHARDSTOCK_SHARD_BATCH_MAX', 64, 1, 1024),
    shardBatchWaitUs: int(env, 'SHARDSTOCK_SHARD_BATCH_WAIT_US', 0, 0, 100_000),
    shardBatchGapUs: int(env, 'SHARDSTOCK_SHARD_BATCH_GAP_US', 0, 0, 90_000),
    shardBatchGapFrom: int(env, 'SHARDSTOCK_SHARD_BATCH_GAP_FROM', 8, 1, 100_000),
    waitTimeoutMs: int(env, 'SHARDSTOCK_WAIT_TIMEOUT_MS', 200, 1, 60_000),
    ackReplicas: int(env, 'SHARDSTOCK_ACK_REPLICAS', 1, 1, 16),
    workers,
    relayBatch: int(env, 'SHARDSTOCK_RELAY_BATCH', 1000, 1, 10_000),
    settleBatch: int(env, 'SHARDSTOCK_SETTLE_BATCH', 2000, 1, 10_000),
    settleConcurrency: int(env, 'SHARDSTOCK_SETTLE_CONCURRENCY', 4, 1, 64),
    settlePerCoupon: int(env, 'SHARDSTOCK_SETTLE_PER_COUPON', 2, 1, 64),
    relayInFlight: int(env, 'SHARDSTOCK_RELAY_IN_FLIGHT', 2000, 1, 50_000),
    settleMaxDeliver: int(env, 'SHARDSTOCK_SETTLE_MAX_DELIVER', 5, 1, 100),
    relayClaimIdleMs: int(env, 'SHARDSTOCK_RELAY_CLAIM_IDLE_MS', 15_000, 100, 3_600_000),
    sweepIntervalMs: int(env, 'SHARDSTOCK_SWEEP_INTERVAL_MS', 2000, 50, 600_000),
    reconcileIntervalMs: int(env, 'SHARDSTOCK_RECONCILE_INTERVAL_MS', 30_000, 0, 86_400_000),
    watchMinIntervalMs: int(env, 'SHARDSTOCK_WATCH_MIN_INTERVAL_MS', 100, 1, 60_000),
    lowStockThreshold: threshold('SHARDSTOCK_LOW_STOCK_THRESHOLD', str(env, 'SHARDSTOCK_LOW_STOCK_THRESHOLD', '10%')),
    lowStockOverrides: thresholdOverrides('SHARDSTOCK_LOW_STOCK_THRESHOLDS', str(env, 'SHARDSTOCK_LOW_STOCK_THRESHOLDS', '')),
    shutdownGraceMs: int(env, 'SHARDSTOCK_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    maxMessageBytes: int(env, 'SHARDSTOCK_MAX_MESSAGE_BYTES', 65_536, 1024, 16 * 1024 * 1024),
    logLevel: str(env, 'SHARDSTOCK_LOG_LEVEL', 'info'),
    instanceId: str(env, 'SHARDSTOCK_INSTANCE_ID', `${process.env.HOSTNAME ?? 'local'}-${process.pid}`),
    ...security(env, [grpcAddr, httpAddr]),
    ...network(env),
    natsAuth: natsAuth(env),
    natsTls: natsTls(env),
  });
  orderTiming(config);
  return config;
}

/** An order commits only while each of its holds outlives the commit by the margin plus two order sweeps, and
 * extends the holds closer to expiry by that plus a second first (src/domain/orders.ts lifetime). With a hold
 * maximum (capped at half the idempotency window) shorter than that, every DeductOrder was refused
 * INVALID_ARGUMENT over a ttl_ms its caller never sent, its holds left taken until the order sweeper gave up. */
function orderTiming(c: Pick<Config, 'holdTtlMaxMs' | 'idempotencyWindowS' | 'orderCommitMarginMs' | 'orderSweepMs'>): void {
  const holdMaxMs = Math.min(c.holdTtlMaxMs, c.idempotencyWindowS * 500);
  const needMs = c.orderCommitMarginMs + 2 * c.orderSweepMs + 1000;
  if (holdMaxMs < needMs)
    throw new ConfigError(
      `SHARDSTOCK_ORDER_COMMIT_MARGIN_MS + 2 x SHARDSTOCK_ORDER_SWEEP_MS + 1000 (${needMs}) must fit in the longest hold ` +
        `(${holdMaxMs}: SHARDSTOCK_HOLD_TTL_MAX_MS, at most half of SHARDSTOCK_IDEMPOTENCY_WINDOW_S), or no order can commit`,
    );
}
