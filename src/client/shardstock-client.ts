// The client internal services use: typed calls on one long-lived channel, a request id made for each
// Deduct / Restock that has none, retries of transport and capacity failures with that SAME request id
// (honouring the server's `retry-after-ms`, with jittered exponential backoff, inside one overall deadline
// per logical call), never a retry of an answer, TLS and bearer-token options, cancellation by AbortSignal.
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { DescMessage, MessageInitShape } from '@bufbuild/protobuf';
import type {
  CompensateRequestSchema,
  CompensateResponse,
  CreateCouponRequestSchema,
  CreateCouponResponse,
  DeductRequestSchema,
  DeductResponse,
  GetStockRequestSchema,
  GetStockResponse,
  ReconcileRequestSchema,
  ReconcileResponse,
  RestockRequestSchema,
  RestockResponse,
  WatchStockRequestSchema,
  WatchStockResponse,
  PauseSaleRequestSchema,
  PauseSaleResponse,
  ResumeSaleRequestSchema,
  ResumeSaleResponse,
  SetSaleWindowRequestSchema,
  SetSaleWindowResponse,
  GetDeductionRequestSchema,
  GetDeductionResponse,
  ListAnomaliesRequestSchema,
  ListAnomaliesResponse,
  ListLedgerRequestSchema,
  ListLedgerResponse,
  ConfirmRequestSchema,
  ConfirmResponse,
  ExtendHoldRequestSchema,
  ExtendHoldResponse,
  ReleaseRequestSchema,
  ReleaseResponse,
  ReserveRequestSchema,
  ReserveResponse,
  DeductOrderRequestSchema,
  DeductOrderResponse,
  ReserveOrderRequestSchema,
  ReserveOrderResponse,
} from '../gen/inventory/v1/inventory_pb.js';
import { ShardstockCallError, PlaintextTokenError } from './call-error.js';
import { createInventoryClient, type CallOptions as AttemptOptions } from './grpc-client.js';
import { isLoopbackTarget } from './loopback.js';
import {
  backoffMs,
  Code,
  DEFAULT_RETRY_POLICY,
  decideRetry,
  parseRetryAfter,
  type AttemptFailure,
  type RetryPolicy,
} from './retry-policy.js';

type Pem = string | Buffer;

export interface TlsOptions {
  /** CA certificate(s) that signed the server's certificate (PEM). Default: the system's roots. */
  ca?: Pem | undefined;
  /** Client certificate and key (PEM), for a server that requires mTLS. */
  cert?: Pem | undefined;
  key?: Pem | undefined;
  /** The name to check the server's certificate against, when it differs from the address's host. */
  serverName?: string | undefined;
}

export interface ShardstockClientOptions {
  /** gRPC address of a shardstock instance (or a balancer): `host:port`, `dns:///host:port`. */
  address: string;
  /** TLS to the gRPC port: `true` for the system's roots, or PEMs. Default plaintext. */
  tls?: boolean | TlsOptions | undefined;
  /** Bearer token sent as `authorization: Bearer <token>` on every call (SHARDSTOCK_AUTH=token). Over
   * plaintext it is refused (PlaintextTokenError) unless the address is loopback or allowPlaintextToken. */
  token?: string | undefined;
  allowPlaintextToken?: boolean | undefined;
  /** Overall deadline of one logical call, every attempt and wait included, in ms. Default 10000. */
  deadlineMs?: number | undefined;
  /** Deadline of one attempt; an attempt that runs out of it is retried (same request id) while the overall
   * deadline lasts. Default: what is left of the overall deadline. */
  attemptTimeoutMs?: number | undefined;
  retry?: Partial<RetryPolicy> | undefined;
  /** Called before each retry, e.g. to log or count them. */
  onRetry?: ((event: RetryEvent) => void) | undefined;
  /** grpc-js channel options (`grpc.keepalive_time_ms`, ...) and client `interceptors`. */
  channelOptions?: grpc.ClientOptions | undefined;
}

export interface RetryEvent {
  method: string;
  requestId: string | undefined;
  /** The attempt that failed (1 = the first). */
  attempt: number;
  code: number;
  details: string;
  retryAfterMs: number | undefined;
  /** How long the client waits before the next attempt. */
  delayMs: number;
}

export interface CallOptions {
  /** This call's overall deadline in ms, instead of the client's. */
  deadlineMs?: number | undefined;
  /** Aborting stops the call (the attempt in flight is cancelled, a wait ends) with CANCELLED. */
  signal?: AbortSignal | undefined;
  /** Extra request metadata. */
  metadata?: Record<string, string> | undefined;
}

type Req<S extends DescMessage> = MessageInitShape<S>;

/** How the call went: the request id all attempts carried, and how many there were. */
export interface Attempted {
  requestId: string;
  attempts: number;
}
export interface Counted {
  attempts: number;
}

export interface ShardstockClient {
  /** `requestId` is made (a UUID) when not given and returned; keep it to retry or compensate later. */
  deduct(req: Req<typeof DeductRequestSchema>, o?: CallOptions): Promise<DeductResponse & Attempted>;
  /** Gives back the deduction of `requestId`, once. */
  compensate(req: Req<typeof CompensateRequestSchema> & { requestId: string }, o?: CallOptions): Promise<CompensateResponse & Attempted>;
  /** `requestId` is made when not given and returned. */
  restock(req: Req<typeof RestockRequestSchema>, o?: CallOptions): Promise<RestockResponse & Attempted>;
  createCoupon(req: Req<typeof CreateCouponRequestSchema>, o?: CallOptions): Promise<CreateCouponResponse & Counted>;
  getStock(req: Req<typeof GetStockRequestSchema>, o?: CallOptions): Promise<GetStockResponse & Counted>;
  reconcile(req: Req<typeof ReconcileRequestSchema>, o?: CallOptions): Promise<ReconcileResponse & Counted>;
  /** Admin: the sale window; unset ends are open. A retry sets the same window (no second change). */
  setSaleWindow(req: Req<typeof SetSaleWindowRequestSchema>, o?: CallOptions): Promise<SetSaleWindowResponse & Counted>;
  /** Admin: the kill switch. A retry finds it paused already (changed = false). */
  pauseSale(req: Req<typeof PauseSaleRequestSchema>, o?: CallOptions): Promise<PauseSaleResponse & Counted>;
  resumeSale(req: Req<typeof ResumeSaleRequestSchema>, o?: CallOptions): Promise<ResumeSaleResponse & Counted>;
  /** Admin: where one request stands (Redis, in flight, ledger, anomalies). */
  getDeduction(req: Req<typeof GetDeductionRequestSchema>, o?: CallOptions): Promise<GetDeductionResponse & Counted>;
  /** Admin: one page of a coupon's ledger; pass next_page_token back for the next. */
  listLedger(req: Req<typeof ListLedgerRequestSchema>, o?: CallOptions): Promise<ListLedgerResponse & Counted>;
  listAnomalies(req: Req<typeof ListAnomaliesRequestSchema>, o?: CallOptions): Promise<ListAnomaliesResponse & Counted>;
  /** `requestId` is made when not given and returned; the hold id is in the answer. */
  reserve(req: Req<typeof ReserveRequestSchema>, o?: CallOptions): Promise<ReserveResponse & Attempted>;
  /** Confirm, Release and ExtendHold are idempotent: retried like Deduct. */
  confirm(req: Req<typeof ConfirmRequestSchema>, o?: CallOptions): Promise<ConfirmResponse & Counted>;
  release(req: Req<typeof ReleaseRequestSchema>, o?: CallOptions): Promise<ReleaseResponse & Counted>;
  extendHold(req: Req<typeof ExtendHoldRequestSchema>, o?: CallOptions): Promise<ExtendHoldResponse & Counted>;
  /** All-or-nothing orders; `requestId` (the order's id) is made when not given and returned. Retried with it. */
  reserveOrder(req: Req<typeof ReserveOrderRequestSchema>, o?: CallOptions): Promise<ReserveOrderResponse & Attempted>;
  deductOrder(req: Req<typeof DeductOrderRequestSchema>, o?: CallOptions): Promise<DeductOrderResponse & Attempted>;
  /** The current level, then every change. A stream broken by a transport failure, or ended OK by the server
   * (its stream lifetime, a shutdown), is opened again (its first message is the level at that moment, so
   * nothing is missed for a level view); `deadlineMs` is ignored unless given per call, and then bounds the
   * whole watch, reconnections included. Stop by leaving the loop or aborting the signal. */
  watchStock(req: Req<typeof WatchStockRequestSchema>, o?: CallOptions): AsyncIterable<WatchStockResponse>;
  /** Closes the channel: open watches end CANCELLED (`the client was closed`), and so do calls waiting to
   * retry; an attempt in flight still ends with its answer. */
  close(): void;
}

function credentialsFor(tls: ShardstockClientOptions['tls']): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  if (tls === true) return grpc.credentials.createSsl();
  const buf = (p: Pem | undefined) => (p === undefined ? null : Buffer.from(p));
  if ((tls.cert === undefined) !== (tls.key === undefined))
    throw new Error('tls: a client certificate needs its key, and a key its certificate');
  return grpc.credentials.createSsl(buf(tls.ca), buf(tls.key), buf(tls.cert));
}

/** A failure after which a write may have been applied: the request may have reached the service and been
 * carried out. Refusals that carry `retry-after-ms` (shed load, fenced shard, rate limit) came before any work. */
function mayHaveApplied(f: AttemptFailure): boolean {
  if (f.retryAfterMs !== undefined) return false;
  return IN_DOUBT_CODES.has(f.code);
}
const IN_DOUBT_CODES: ReadonlySet<number> = new Set([
  Code.CANCELLED,
  2 /* UNKNOWN */,
  Code.DEADLINE_EXCEEDED,
  13 /* INTERNAL */,
  Code.UNAVAILABLE,
]);

/** Waits `ms`, or until one of the signals aborts. */
function sleep(ms: number, ...signals: (AbortSignal | undefined)[]): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const s of signals) s?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const s of signals) s?.addEventListener('abort', done, { once: true });
  });
}

function isServiceError(err: unknown): err is grpc.ServiceError {
  return typeof (err as { code?: unknown } | null)?.code === 'number';
}

interface GiveUp {
  method: string;
  requestId: string | undefined;
  attempts: number;
  reason: ShardstockCallError['reason'];
  /** Why a cancelled call was cancelled, when not by the caller's signal. */
  cancelledBy?: string | undefined;
  inDoubt: boolean;
  /** The last attempt's failure; its status is the call's (except when the caller cancelled). */
  last: grpc.ServiceError | undefined;
  cause: unknown;
}

function gaveUp(g: GiveUp): ShardstockCallError {
  const cancelled = g.reason === 'cancelled';
  return new ShardstockCallError({
    method: g.method,
    code: cancelled ? Code.CANCELLED : (g.last?.code ?? Code.DEADLINE_EXCEEDED),
    details: cancelled ? (g.cancelledBy ?? 'cancelled by the caller') : (g.last?.details ?? 'deadline exceeded before the first attempt'),
    metadata: cancelled ? undefined : g.last?.metadata,
    requestId: g.requestId,
    attempts: g.attempts,
    reason: g.reason,
    inDoubt: g.inDoubt,
    cause: g.cause,
  });
}

export function createShardstockClient(options: ShardstockClientOptions): ShardstockClient {
  const { address, token } = options;
  if (token && !options.tls && !options.allowPlaintextToken && !isLoopbackTarget(address)) throw new PlaintextTokenError(address);
  const serverName = typeof options.tls === 'object' ? options.tls.serverName : undefined;
  const raw = createInventoryClient(
    address,
    { ...options.channelOptions, ...(serverName ? { 'grpc.ssl_target_name_override': serverName } : {}) },
    credentialsFor(options.tls),
  );
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
  // close() ends what would outlive the channel: grpc-js leaves a call running when its channel closes, so a
  // watch would stream on (and hold its server-side stream) for ever; retry waits end too. A unary attempt in
  // flight still ends with its answer.
  const closing = new AbortController();
  const closedBy = 'the client was closed';
  const defaultDeadlineMs = options.deadlineMs ?? 10_000;

  const headers = (requestId: string | undefined, extra: Record<string, string> | undefined): Record<string, string> => ({
    ...extra,
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    // The server logs it with the call: one id from the caller's log line to the ledger row.
    ...(requestId ? { 'x-request-id': requestId } : {}),
  });

  async function unary<Res extends object>(
    method: string,
    mutating: boolean,
    requestId: string | undefined,
    send: (o: AttemptOptions) => Promise<Res>,
    o: CallOptions | undefined,
  ): Promise<Res & Counted> {
    const deadlineAt = Date.now() + (o?.deadlineMs ?? defaultDeadlineMs);
    const signal = o?.signal;
    const metadata = headers(requestId, o?.metadata);
    const call = { method, requestId };
    let inDoubt = false;
    let last: grpc.ServiceError | undefined;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw gaveUp({ ...call, attempts: attempt - 1, reason: 'cancelled', inDoubt, last, cause: signal.reason });
      if (closing.signal.aborted)
        throw gaveUp({ ...call, attempts: attempt - 1, reason: 'cancelled', cancelledBy: closedBy, inDoubt, last, cause: last });
      const left = deadlineAt - Date.now();
      if (left <= 0) throw gaveUp({ ...call, attempts: attempt - 1, reason: 'deadline', inDoubt, last, cause: last });
      const attemptMs = options.attemptTimeoutMs ? Math.min(left, options.attemptTimeoutMs) : left;
      try {
        const res = await send({ deadlineMs: attemptMs, metadata, signal });
        return { ...res, attempts: attempt };
      } catch (err) {
        if (!isServiceError(err)) throw err;
        last = err;
        // Cancelled mid-attempt: the request may have reached the service.
        if (signal?.aborted)
          throw gaveUp({ ...call, attempts: attempt, reason: 'cancelled', inDoubt: mutating, last, cause: signal.reason });
        const f: AttemptFailure = {
          code: err.code,
          retryAfterMs: parseRetryAfter(err.metadata?.get('retry-after-ms')[0]),
          attemptTimedOut: err.code === Code.DEADLINE_EXCEEDED && attemptMs < left,
        };
        if (mutating && mayHaveApplied(f)) inDoubt = true;
        const d = decideRetry(f, attempt, deadlineAt - Date.now(), policy);
        if (!d.retry) throw gaveUp({ ...call, attempts: attempt, reason: d.reason, inDoubt, last, cause: err });
        options.onRetry?.({
          method,
          requestId,
          attempt,
          code: err.code,
          details: err.details,
          retryAfterMs: f.retryAfterMs,
          delayMs: d.delayMs,
        });
        await sleep(d.delayMs, signal, closing.signal);
      }
    }
  }

  const withId = <R extends object>(requestId: string, p: Promise<R & Counted>): Promise<R & Attempted> =>
    p.then((r) => ({ ...r, requestId }));

  return {
    deduct(req, o) {
      const requestId = req.requestId || randomUUID();
      return withId(
        requestId,
        unary('Deduct', true, requestId, (a) => raw.deduct({ ...req, requestId }, a), o),
      );
    },
    compensate(req, o) {
      return withId(
        req.requestId,
        unary('Compensate', true, req.requestId, (a) => raw.compensate(req, a), o),
      );
    },
    restock(req, o) {
      const requestId = req.requestId || randomUUID();
      return withId(
        requestId,
        unary('Restock', true, requestId, (a) => raw.restock({ ...req, requestId }, a), o),
      );
    },
    createCoupon: (req, o) => unary('CreateCoupon', true, undefined, (a) => raw.createCoupon(req, a), o),
    getStock: (req, o) => unary('GetStock', false, undefined, (a) => raw.getStock(req, a), o),
    reconcile: (req, o) => unary('Reconcile', false, undefined, (a) => raw.reconcile(req, a), o),
    setSaleWindow: (req, o) => unary('SetSaleWindow', true, undefined, (a) => raw.setSaleWindow(req, a), o),
    pauseSale: (req, o) => unary('PauseSale', true, undefined, (a) => raw.pauseSale(req, a), o),
    resumeSale: (req, o) => unary('ResumeSale', true, undefined, (a) => raw.resumeSale(req, a), o),
    getDeduction: (req, o) => unary('GetDeduction', false, undefined, (a) => raw.getDeduction(req, a), o),
    listLedger: (req, o) => unary('ListLedger', false, undefined, (a) => raw.listLedger(req, a), o),
    listAnomalies: (req, o) => unary('ListAnomalies', false, undefined, (a) => raw.listAnomalies(req, a), o),
    reserve(req, o) {
      const requestId = req.requestId || randomUUID();
      return withId(
        requestId,
        unary('Reserve', true, requestId, (a) => raw.reserve({ ...req, requestId }, a), o),
      );
    },
    confirm: (req, o) => unary('Confirm', true, undefined, (a) => raw.confirm(req, a), o),
    release: (req, o) => unary('Release', true, undefined, (a) => raw.release(req, a), o),
    extendHold: (req, o) => unary('ExtendHold', true, undefined, (a) => raw.extendHold(req, a), o),
    reserveOrder(req, o) {
      const requestId = req.requestId || randomUUID();
      return withId(
        requestId,
        unary('ReserveOrder', true, requestId, (a) => raw.reserveOrder({ ...req, requestId }, a), o),
      );
    },
    deductOrder(req, o) {
      const requestId = req.requestId || randomUUID();
      return withId(
        requestId,
        unary('DeductOrder', true, requestId, (a) => raw.deductOrder({ ...req, requestId }, a), o),
      );
    },
    watchStock(req, o) {
      const signal = o?.signal ? AbortSignal.any([o.signal, closing.signal]) : closing.signal;
      const cancelledBy = () => (closing.signal.aborted ? closedBy : undefined);
      const metadata = headers(undefined, o?.metadata);
      const call = { method: 'WatchStock', requestId: undefined };
      // A per-call deadline bounds the whole watch: each stream opened again gets only what is left of it.
      const deadlineAt = o?.deadlineMs ? Date.now() + o.deadlineMs : Number.POSITIVE_INFINITY;
      return (async function* () {
        let failures = 0;
        // Streams in a row that the server ended OK before their first level (an instance shutting down).
        let emptyEnds = 0;
        let last: grpc.ServiceError | undefined;
        for (;;) {
          const left = deadlineAt - Date.now();
          if (left <= 0) throw gaveUp({ ...call, attempts: failures, reason: 'deadline', inDoubt: false, last, cause: last });
          if (signal.aborted)
            throw gaveUp({
              ...call,
              attempts: failures,
              reason: 'cancelled',
              cancelledBy: cancelledBy(),
              inDoubt: false,
              last,
              cause: signal.reason,
            });
          let got = false;
          try {
            const deadlineMs = Number.isFinite(left) ? left : undefined;
            for await (const m of raw.watchStock(req, { metadata, signal, deadlineMs })) {
              failures = 0;
              emptyEnds = 0;
              got = true;
              yield m;
            }
          } catch (err) {
            if (!isServiceError(err)) throw err;
            last = err;
            if (signal.aborted)
              throw gaveUp({
                ...call,
                attempts: failures + 1,
                reason: 'cancelled',
                cancelledBy: cancelledBy(),
                inDoubt: false,
                last: err,
                cause: signal.reason,
              });
            failures++;
            const f = { code: err.code, retryAfterMs: parseRetryAfter(err.metadata?.get('retry-after-ms')[0]), attemptTimedOut: false };
            const d = decideRetry(f, failures, deadlineAt - Date.now(), policy);
            if (!d.retry) throw gaveUp({ ...call, attempts: failures, reason: d.reason, inDoubt: false, last: err, cause: err });
            options.onRetry?.({
              method: 'WatchStock',
              requestId: undefined,
              attempt: failures,
              code: err.code,
              details: err.details,
              retryAfterMs: f.retryAfterMs,
              delayMs: d.delayMs,
            });
            await sleep(d.delayMs, signal);
            continue;
          }
          // An OK end is the server asking for a new stream (its lifetime ran out, the instance is shutting
          // down): open one, wherever the address leads now. Ends without a level back off, and after
          // maxAttempts of them in a row the watch ends as the server ended it.
          if (signal.aborted) return;
          if (!got) emptyEnds++;
          if (emptyEnds >= policy.maxAttempts) return;
          await sleep(Math.ceil(backoffMs(emptyEnds + 1, policy)), signal);
        }
      })();
    },
    close: () => {
      closing.abort();
      raw.close();
    },
  };
}
