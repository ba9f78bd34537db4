// Every command's summary and usage text, in one light module: `--help` and the top-level help load no gRPC or
// protobuf code (which takes a second or more to import on a busy machine).
import { COMMON_HELP } from './options.js';

export const SERVE_SUMMARY = 'run a service instance in the foreground';
export const SERVE_HELP = `Usage:
  shardstock serve [--env-file FILE]

Runs one shardstock instance in the foreground, configured from SHARDSTOCK_* environment variables
(reference: npm run docs:config, or docs/operations.md). --env-file loads KEY=value lines first
(variables already set in the environment win). SIGTERM / Ctrl-C drains in-flight calls for up to
SHARDSTOCK_SHUTDOWN_GRACE_MS, then exits; a second Ctrl-C exits at once.
Exit 2 on a configuration error, 1 when a dependency cannot be reached at start.`;

export const STACK_SUMMARY = 'start, stop or inspect the local Redis/NATS/MariaDB stack';
export const STACK_HELP = `Usage:
  shardstock stack setup | up | down | status | reset

The local development stack on loopback: Redis Cluster 127.0.0.1:7001-7006 (3 masters + 3 replicas),
NATS JetStream on 4222, MariaDB on 3306 (deploy/local/stack.ts). Data lives in .data/.
setup   installs the Debian packages the stack and the tests use (as root; otherwise prints the command)
up      reuses what answers and starts only what is missing, from its kept data: a Redis node restarts
        from its AOF and nodes.conf and rejoins; a cluster is created only when none exists yet
down    stops only what this stack started (data kept)
status  says what answers
reset   stops what this stack started and deletes its data under .data/, naming each path first
For production see deploy/ and docs/operations.md.

${COMMON_HELP}`;

export const COUPON_SUMMARY = 'create a coupon, read its stock level, restock it, set its sale window, pause or resume it';
export const COUPON_HELP = `Usage:
  shardstock coupon create <coupon-id> --stock N [--shards S] [--per-user-limit L]
  shardstock coupon get <coupon-id> [--shards]
  shardstock coupon restock <coupon-id> --quantity N [--request-id ID]
  shardstock coupon window <coupon-id> [--starts-at TIME] [--ends-at TIME] [--reason TEXT]
  shardstock coupon pause <coupon-id> [--reason TEXT]
  shardstock coupon resume <coupon-id> [--reason TEXT]

create   defines a coupon and preheats its shards; repeating the same definition is a no-op,
         a different one fails with ALREADY_EXISTS. --shards 0 (default) = the server's default.
get      the current level: Redis shards, MySQL settled remaining, what is still settling.
         --shards adds one row per shard.
restock  adds N units. Idempotent by request id: a random one is made and printed when not given;
         re-run with --request-id <that id> after a timeout to retry without adding twice.
window   sets when the sale opens (--starts-at, inclusive) and closes (--ends-at, exclusive); TIME is
         ISO 8601 (2030-01-01T10:00:00Z); a missing end is unbounded. create takes both too.
pause    kill switch: every instance answers Deduct with sale_paused, without touching Redis;
         Compensate still works. resume lifts it. Each change is a ledger row (SALE_*).

${COMMON_HELP}`;

export const DEDUCT_SUMMARY = 'take units for a request (or run N of them with --count)';
export const DEDUCT_HELP = `Usage:
  shardstock deduct <coupon-id> [--quantity Q] [--allow-partial] [--user U] [--request-id ID]
  shardstock deduct <coupon-id> --count N [--concurrency C] [--quantity Q] [--user U | --users K] [--prefix P]

One deduction: prints the outcome; exit 0 when units were deducted, 3 when the service said no (sold out,
insufficient, user limit). A request id is made up and printed when not given: re-run with
--request-id <it> to retry safely (a replay returns the original outcome). --allow-partial takes what is left
up to Q instead of answering insufficient; "granted" says how much.

Load mode (--count): N deductions, at most C in flight (default 32), request ids <prefix>-<i>. Users: --user
for all, --users K for K distinct users (user-<i mod K>), else one user per request. Shows a progress bar on
a terminal, then outcome counts, errors by gRPC status, rate and latency percentiles. Ctrl-C stops early and
still prints what was done. Exit 0 when every call was answered, 1 when some failed.

${COMMON_HELP}`;

export const COMPENSATE_SUMMARY = 'give back the units of one earlier deduction';
export const COMPENSATE_HELP = `Usage:
  shardstock compensate <coupon-id> <request-id> [--reason TEXT]

Gives back the units deducted by <request-id>, once: repeating it answers already_compensated.
Exit 0 for compensated / already_compensated, 3 when that request never deducted (not_deducted).

${COMMON_HELP}`;

export const ORDER_SUMMARY = 'take several coupons at once, all or nothing (or confirm / release an order)';
export const ORDER_HELP = `Usage:
  shardstock order <coupon-id>[=Q] [<coupon-id>[=Q] ...] [--reserve] [--ttl MS] [--user U] [--request-id ID]
  shardstock order --confirm <order-id>
  shardstock order --release <order-id> [--reason TEXT]
  shardstock order --extend <order-id> [--ttl MS]
  shardstock order --compensate <order-id> [--reason TEXT]

One order of several items (Q units of each coupon, default 1): every item is taken or none is, even across
shards and Redis masters. Without --reserve the items are deducted (DeductOrder); with --reserve they are held
until --ttl ms (ReserveOrder; 0 = the server default): confirm the order after payment, release it when payment
fails, or let it expire. The answer names the refused item and why (sold_out, insufficient,
user_limit_exceeded). An order id is made up and printed when not given: re-run with --request-id <it> to retry
safely (a replay returns the original outcome and never takes the items twice).
Exit 0 when the order (or the step) succeeded, 3 when the service said no (refused, expired, released).

${COMMON_HELP}`;

export const RESERVE_SUMMARY = 'hold units for a while (confirm, release or let expire)';
export const RESERVE_HELP = `Usage:
  shardstock reserve <coupon-id> [--quantity Q] [--user U] [--request-id ID] [--ttl MS]

Takes Q units (default 1) out of available stock into a hold that lasts --ttl ms (default: the server's
SHARDSTOCK_HOLD_TTL_DEFAULT_MS). Prints the hold id to pass to confirm / release / extend. The same rules as
deduct: a retry with the same --request-id answers the same hold. Exit 0 when held, 3 when the service said no
(sold out, insufficient, user limit, sale closed).

${COMMON_HELP}`;

export const CONFIRM_SUMMARY = 'turn a hold into a deduction';
export const CONFIRM_HELP = `Usage:
  shardstock confirm <hold-id> [--quantity Q]

Deducts the held units (or only Q of them: the rest go back on sale at once), settled to MySQL like any
deduction. Repeating it answers the same. Exit 0 when confirmed, 3 when the hold had expired, was released or
is not found.

${COMMON_HELP}`;

export const RELEASE_SUMMARY = 'give a hold back';
export const RELEASE_HELP = `Usage:
  shardstock release <hold-id> [--reason TEXT]

Gives the held units back. Exit 0 for released / already_released, 3 when the hold had expired, was confirmed
(use compensate) or is not found.

${COMMON_HELP}`;

export const EXTEND_SUMMARY = "move a hold's expiry";
export const EXTEND_HELP = `Usage:
  shardstock extend <hold-id> [--ttl MS]

The hold now expires --ttl ms from now (Redis server time; default the server's default TTL), if it has not
expired yet. Exit 0 when extended, 3 otherwise.

${COMMON_HELP}`;

export const WATCH_SUMMARY = "live view of a coupon's stock level";
export const WATCH_HELP = `Usage:
  shardstock watch <coupon-id> [--interval MS] [--count N] [--no-fallback]

Shows the coupon's level and redraws it whenever it changes (WatchStock; at most one update per
--interval ms, default: the server's). On a terminal the view updates in place, with per-shard bars;
piped, it prints one line per update; --json prints one JSON level per line.
--count N stops after N updates. Ctrl-C stops.
If the server does not implement WatchStock, GetStock is polled every --interval ms (at least 200)
instead; --no-fallback makes that an error (exit 22) instead.

${COMMON_HELP}`;

export const RECONCILE_SUMMARY = 'compare Redis, in-flight events and MySQL for a coupon';
export const RECONCILE_HELP = `Usage:
  shardstock reconcile <coupon-id> [--repair]

Compares the Redis shards, the events still on their way (Redis outbox + JetStream) and MySQL (the coupon
row and the ledger) for one coupon, and prints each figure with the two drifts:
  ledger drift  settled_remaining - (total + restocked - ledger_deducted + ledger_compensated)
  redis drift   redis_available - (settled_remaining - in_flight_net)
With --repair (admin role) it first brings Redis back to its bound in both directions — rebuilds lost
shards, lowers a surplus, restores lost units, each change a REPAIR ledger row — then reports.
Exit 0 when consistent, 3 when not (see docs/operations.md, "Drift").

${COMMON_HELP}`;

export const AUDIT_SUMMARY = "what happened to a request, a coupon's ledger, the anomalies (admin)";
export const AUDIT_HELP = `Usage:
  shardstock audit deduction <coupon-id> <request-id>
  shardstock audit ledger <coupon-id> [--kind K[,K…]] [--user U] [--since TIME] [--until TIME] [--page-size N] [--page-token T] [--all]
  shardstock audit anomalies [<coupon-id>] [--page-size N] [--page-token T] [--all]

deduction  where one request stands: its Redis record (kept for the idempotency window), events still in
           flight (outbox, JetStream), its ledger rows and anomalies, and one state: none, deducted,
           compensated or refused (oversold, an anomaly).
ledger     the coupon's ledger rows, oldest first: kinds deduct, compensate, restock, repair, sale_window,
           sale_pause, sale_resume; occurred_at in [--since, --until). One page (default 100 rows) unless --all.
anomalies  events MySQL refused, for one coupon or all.
Admin role (SHARDSTOCK_CLI_TOKEN with an admin token).

${COMMON_HELP}`;

export const BENCH_SUMMARY = 'run the benchmark (arguments passed through)';
export const BENCH_HELP = `Usage:
  shardstock bench [benchmark arguments...]

Runs the benchmark (bench/run.ts, the same as  npm run bench -- ARGS) on this Node with tsx, from a
development checkout; every argument after "bench" is passed through unchanged, so
  shardstock bench --help
shows the benchmark's own options. The exit code is the benchmark's.`;
