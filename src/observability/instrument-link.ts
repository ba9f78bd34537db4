// The instrument link of the call chain (src/transport/call-chain.ts), between the gate and the handler:
// counts every call by transport, method and outcome, times unary calls, tracks open streams, and logs lines
// about a call with its ids (x-request-id when the client sent one, the message's request_id and coupon_id)
// — never the user id or anything secret. It also counts the calls the gate refused (refusedBy), with their
// status as the outcome. Method names and outcome labels come from the descriptors (protocol/enum-names.ts),
// so a new RPC is instrumented without a line here.
import { randomBytes } from 'node:crypto';
import type { DescMethod } from '@bufbuild/protobuf';
import { outcomeLabeller } from '../protocol/enum-names.js';
import type { Call, Link, RefusalHook } from '../transport/call-link.js';
import { codeName, GrpcCode, type RpcStatus, toStatus } from '../transport/status.js';
import { LogThrottle } from '../util/log-throttle.js';
import type { Logger } from '../util/logger.js';
import type { CounterChild, HistogramChild } from './fast-metrics.js';
import type { Metrics, Transport } from './metrics.js';

export interface InstrumentOptions {
  metrics: Metrics;
  log: Logger;
  /** UNAVAILABLE failures are logged at most once per method and cause per this interval. Default 5000. */
  unavailableLogIntervalMs?: number;
}

export interface Instrument {
  link: Link;
  /** For the gate link: counts a refused call under its status. */
  refusedBy: RefusalHook;
}

interface Ids {
  couponId?: string;
  requestId?: string;
}

type Fields = Record<string, unknown>;

/** The fields every log line about one call carries. A call without x-request-id gets a random one. */
function callFields(method: string, req: unknown, call: Call): Fields {
  const fields: Fields = { rid: call.requestId || randomBytes(6).toString('hex'), transport: call.transport, method };
  const ids = req as Ids | undefined;
  if (ids?.couponId) fields.couponId = ids.couponId;
  if (ids?.requestId) fields.requestId = ids.requestId;
  return fields;
}

/** One per transport, so a call picks its children by call.transport without a lookup by string. */
type PerTransport<T> = Record<Transport, T>;

export function instrumentCalls(o: InstrumentOptions): Instrument {
  const { metrics, log } = o;
  const unavailableLog = new LogThrottle(o.unavailableLogIntervalMs ?? 5000);

  /** Counter children per transport, method and outcome, resolved once per outcome seen. */
  const countersFor = (method: string): PerTransport<(outcome: string) => CounterChild> => {
    const of = (transport: Transport) => {
      const byOutcome = new Map<string, CounterChild>();
      return (outcome: string) => {
        let c = byOutcome.get(outcome);
        if (!c) {
          c = metrics.rpcCalls.child(transport, method, outcome);
          byOutcome.set(outcome, c);
        }
        return c;
      };
    };
    return { grpc: of('grpc'), connect: of('connect') };
  };
  const countersByMethod = new Map<string, PerTransport<(outcome: string) => CounterChild>>();
  const counters = (method: string) => {
    let c = countersByMethod.get(method);
    if (!c) {
      c = countersFor(method);
      countersByMethod.set(method, c);
    }
    return c;
  };

  /** Domain refusals are answers, not faults; bugs (INTERNAL) are logged with the call's ids and stack. A
   *  dependency that is away (UNAVAILABLE: Redis failover, MySQL down) fails every call alike: a warning
   *  without stack, at most one per method and cause every few seconds. Returns the fields if it logged. */
  const logFailure = (s: RpcStatus, method: string, req: unknown, call: Call): Fields | undefined => {
    if (!s.unexpected) return undefined;
    if (s.code === GrpcCode.UNAVAILABLE) {
      const cause = s.unexpected as { name?: string; message?: string };
      const suppressed = unavailableLog.take(`${method}|${cause?.name}`);
      if (suppressed === undefined) return undefined;
      const fields = callFields(method, req, call);
      log.warn(
        { ...fields, code: 'unavailable', cause: `${cause?.name ?? 'Error'}: ${cause?.message ?? String(cause)}`, suppressed },
        'call failed: dependency unavailable',
      );
      return fields;
    }
    const fields = callFields(method, req, call);
    log.error({ ...fields, code: codeName(s.code), err: s.unexpected }, 'call failed');
    return fields;
  };

  const link: Link = {
    unary(next, m: DescMethod) {
      const method = m.name;
      const calls = counters(method);
      const duration: PerTransport<HistogramChild> = {
        grpc: metrics.rpcDuration.child('grpc', method),
        connect: metrics.rpcDuration.child('connect', method),
      };
      const outcomeOf = outcomeLabeller(m.output);
      return async (req, call) => {
        const start = performance.now();
        let outcome = 'ok';
        let fields: Fields | undefined;
        try {
          const res = await next(req, call);
          outcome = outcomeOf(res);
          return res;
        } catch (err) {
          const s = toStatus(err);
          outcome = codeName(s.code);
          fields = logFailure(s, method, req, call);
          throw err;
        } finally {
          const seconds = (performance.now() - start) / 1000;
          calls[call.transport](outcome).inc();
          duration[call.transport].observe(seconds);
          if (log.isLevelEnabled('debug'))
            log.debug({ ...(fields ?? callFields(method, req, call)), outcome, ms: Math.round(seconds * 1e4) / 10 }, 'call');
        }
      };
    },

    stream(next, m: DescMethod) {
      const method = m.name;
      const calls = counters(method);
      const sentCounter: PerTransport<CounterChild> = {
        grpc: metrics.watchMessages.child('grpc'),
        connect: metrics.watchMessages.child('connect'),
      };
      return async function* (req, call) {
        const { transport } = call;
        const start = performance.now();
        const sentTotal = sentCounter[transport];
        let outcome = 'ok';
        let fields: Fields | undefined;
        let sent = 0;
        metrics.watchStreams.inc({ transport });
        try {
          for await (const msg of next(req, call)) {
            sentTotal.inc();
            sent++;
            yield msg;
          }
        } catch (err) {
          const s = toStatus(err);
          outcome = codeName(s.code);
          fields = logFailure(s, method, req, call);
          throw err;
        } finally {
          if (outcome === 'ok' && call.signal.aborted) outcome = 'cancelled';
          metrics.watchStreams.dec({ transport });
          calls[transport](outcome).inc();
          if (log.isLevelEnabled('debug'))
            log.debug(
              { ...(fields ?? callFields(method, req, call)), outcome, sent, ms: Math.round(performance.now() - start) },
              'stream ended',
            );
        }
      };
    },
  };

  const refusedBy: RefusalHook = (m) => {
    const calls = counters(m.name);
    return (call, err) => {
      const s = toStatus(err);
      calls[call.transport](codeName(s.code)).inc();
      logFailure(s, m.name, undefined, call);
    };
  };

  return { link, refusedBy };
}
