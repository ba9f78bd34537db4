// What every call passes before its handler runs, on both ports: authentication (bearer token → role),
// authorization (role → RPC), the caller's rate limit and the server's in-flight bound. A refusal is a
// DomainError, so both transports answer it with the same status, message and retry-after-ms.
import { DomainError } from '../domain/errors.js';
import { InFlightLimit } from './in-flight-limit.js';
import { StreamLimit } from './stream-limit.js';
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
  /** RPCs that stream for as long as the client wants: rate-limited when opened, counted against the stream
   *  bounds below instead of the in-flight bound. */
  streaming?: ReadonlySet<string> | undefined;
  /** Streams open at once per instance and per caller; undefined = unbounded. */
  streams?: { max: number; perCaller: number } | undefined;
  /** Told about every refusal, by reason (metrics). */
  onRefused?: ((reason: RefusalReason, transport: string | undefined) => void) | undefined;
  /** How long a shed caller is told to wait. Default 50 ms. */
  shedRetryAfterMs?: number | undefined;
}

export type RefusalReason = 'unauthenticated' | 'permission_denied' | 'rate_limited' | 'shed' | 'stream_cap';

export interface Caller {
  /** The `authorization` header / metadata value, if any. */
  authorization: string | undefined;
  /** Transport peer, e.g. `127.0.0.1:51234`, `[::1]:51234`, `::ffff:10.0.0.1`. */
  peer: string;
  /** Which port the call came in on, for the refusal counts. */
  transport?: string | undefined;
}

const noop = () => {};

export class CallGate {
  private readonly buckets: TokenBuckets | undefined;
  readonly inFlight: InFlightLimit | undefined;
  readonly streams: StreamLimit | undefined;
  readonly refused = { unauthenticated: 0, permissionDenied: 0, rateLimited: 0, shed: 0, streamCap: 0 };

  private tokens: TokenRegistry | undefined;

  constructor(private readonly o: CallGateOptions) {
    this.tokens = o.tokens;
    this.buckets = o.ratePerSec > 0 ? new TokenBuckets(o.ratePerSec, Math.max(1, o.burst)) : undefined;
    this.inFlight = o.maxInFlight > 0 ? new InFlightLimit(o.maxInFlight) : undefined;
    this.streams = o.streams ? new StreamLimit(o.streams.max, o.streams.perCaller) : undefined;
  }

  /** Throws a DomainError to refuse; otherwise returns the function to call when the call is over. */
  admit(method: string, caller: Caller): () => void {
    const who = this.authenticate(caller);
    if (who && !mayCall(who.role, method)) {
      this.refused.permissionDenied++;
      this.o.onRefused?.('permission_denied', caller.transport);
      throw new DomainError('permission_denied', `caller ${who.name} (role ${who.role}) may not call ${method}`);
    }
    // Only rate limits and stream caps count per caller: without them no call pays for parsing its peer.
    const streaming = this.o.streaming?.has(method) === true;
    if (!this.buckets && !streaming) return this.enter(caller);
    const identity = who ? `token:${who.name}` : `peer:${peerHost(caller.peer)}`;
    if (this.buckets) {
      const wait = this.buckets.take(identity);
      if (wait > 0) {
        this.refused.rateLimited++;
        this.o.onRefused?.('rate_limited', caller.transport);
        throw new DomainError(
          'resource_exhausted',
          `rate limit of ${this.o.ratePerSec} calls/s for ${identity} exceeded; retry after ${wait} ms`,
          { retryAfterMs: wait },
        );
      }
    }
    if (streaming) return this.openStream(identity, caller);
    return this.enter(caller);
  }

  /** The in-flight limit (load shedding) of a unary call. */
  private enter(caller: Caller): () => void {
    if (!this.inFlight) return noop;
    const release = this.inFlight.tryEnter();
    if (!release) {
      this.refused.shed++;
      this.o.onRefused?.('shed', caller.transport);
      const after = this.o.shedRetryAfterMs ?? 50;
      throw new DomainError(
        'unavailable',
        `server is at its limit of ${this.inFlight.max} calls in flight; retry after ${after} ms (with the same request_id)`,
        { retryAfterMs: after },
      );
    }
    return release;
  }

  private openStream(identity: string, caller: Caller): () => void {
    if (!this.streams) return noop;
    const opened = this.streams.tryOpen(identity);
    if (typeof opened === 'function') return opened;
    this.refused.streamCap++;
    this.o.onRefused?.('stream_cap', caller.transport);
    const bound = opened === 'total' ? `${this.streams.max} streams per instance` : `${this.streams.perCaller} streams for ${identity}`;
    throw new DomainError('resource_exhausted', `limit of ${bound} reached: close a stream first`);
  }

  /** Token rotation without a restart: calls from now on are checked against these. Auth stays as it was
   *  configured (on or off). */
  replaceTokens(tokens: TokenRegistry): void {
    if (this.tokens) this.tokens = tokens;
  }

  private authenticate(caller: Caller): TokenEntry | undefined {
    if (!this.tokens) return undefined;
    const m = /^Bearer\s+(\S+)\s*$/i.exec(caller.authorization ?? '');
    const who = m ? this.tokens.lookup(m[1]!) : undefined;
    if (!who) {
      this.refused.unauthenticated++;
      this.o.onRefused?.('unauthenticated', caller.transport);
      throw new DomainError(
        'unauthenticated',
        m ? 'unknown bearer token' : 'missing bearer token: send the header `authorization: Bearer <token>`',
      );
    }
    return who;
  }

  /** Whether calls need a token (health Check stays open for probes either way). */
  get authenticates(): boolean {
    return this.tokens !== undefined;
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
