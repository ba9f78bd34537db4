// What every call passes before its handler runs, on both ports: authentication (bearer token → role),
// authorization (role → RPC), the caller's rate limit and the server's in-flight bound. A refusal is a
// DomainError, so both transports answer it with the same status, message and retry-after-ms.
import { DomainError } from '../domain/errors.js';
import { InFlightLimit } from './in-flight-limit.js';
import { mayCall } from './policy.js';
import { TokenBuckets } from './token-bucket.js';
import type { TokenEntry, TokenRegistry } from './tokens.js';

export interface CallGateOptions {
  /** Bearer-token authentication; undefined = off (every caller may call everything). */
  tokens?: TokenRegistry | undefined;
  /** Per-caller sustained calls per second; 0 = no rate limit. */
  ratePerSec: number;
  /** Per-caller burst (bucket size). */
  burst: number;
  /** Unary calls running at once; 0 = unbounded. */
  maxInFlight: number;
  /** RPCs that stream for as long as the client wants: rate-limited when opened, not counted as in flight. */
  streaming?: ReadonlySet<string> | undefined;
  /** How long a shed caller is told to wait. Default 50 ms. */
  shedRetryAfterMs?: number | undefined;
}

export interface Caller {
  /** The `authorization` header / metadata value, if any. */
  authorization: string | undefined;
  /** Transport peer, e.g. `127.0.0.1:51234`, `[::1]:51234`, `::ffff:10.0.0.1`. */
  peer: string;
}

const noop = () => {};

export class CallGate {
  private readonly buckets: TokenBuckets | undefined;
  readonly inFlight: InFlightLimit | undefined;
  readonly refused = { unauthenticated: 0, permissionDenied: 0, rateLimited: 0, shed: 0 };

  constructor(private readonly o: CallGateOptions) {
    this.buckets = o.ratePerSec > 0 ? new TokenBuckets(o.ratePerSec, Math.max(1, o.burst)) : undefined;
    this.inFlight = o.maxInFlight > 0 ? new InFlightLimit(o.maxInFlight) : undefined;
  }

  /** Throws a DomainError to refuse; otherwise returns the function to call when the call is over. */
  admit(method: string, caller: Caller): () => void {
    const who = this.authenticate(caller.authorization);
    if (who && !mayCall(who.role, method)) {
      this.refused.permissionDenied++;
      throw new DomainError('permission_denied', `caller ${who.name} (role ${who.role}) may not call ${method}`);
    }
    if (this.buckets) {
      const identity = who ? `token:${who.name}` : `peer:${peerHost(caller.peer)}`;
      const wait = this.buckets.take(identity);
      if (wait > 0) {
        this.refused.rateLimited++;
        throw new DomainError(
          'resource_exhausted',
          `rate limit of ${this.o.ratePerSec} calls/s for ${identity} exceeded; retry after ${wait} ms`,
          { retryAfterMs: wait },
        );
      }
    }
    if (!this.inFlight || this.o.streaming?.has(method)) return noop;
    const release = this.inFlight.tryEnter();
    if (!release) {
      this.refused.shed++;
      const after = this.o.shedRetryAfterMs ?? 50;
      throw new DomainError(
        'unavailable',
        `server is at its limit of ${this.inFlight.max} calls in flight; retry after ${after} ms (with the same request_id)`,
        { retryAfterMs: after },
      );
    }
    return release;
  }

  private authenticate(authorization: string | undefined): TokenEntry | undefined {
    if (!this.o.tokens) return undefined;
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!m) {
      this.refused.unauthenticated++;
      throw new DomainError('unauthenticated', 'missing bearer token: send the header `authorization: Bearer <token>`');
    }
    const who = this.o.tokens.lookup(m[1]!);
    if (!who) {
      this.refused.unauthenticated++;
      throw new DomainError('unauthenticated', 'unknown bearer token');
    }
    return who;
  }
}

/** The address without port, IPv4-mapped IPv6 unwrapped, so one host is one caller on both ports. */
export function peerHost(peer: string): string {
  let p = peer.replace(/^(ipv4|ipv6):/, '');
  const bracket = /^\[([^\]]+)\](?::\d+)?$/.exec(p);
  if (bracket) p = bracket[1]!;
  else if (/^[^:]+:\d+$/.test(p)) p = p.slice(0, p.lastIndexOf(':'));
  return p.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
}
