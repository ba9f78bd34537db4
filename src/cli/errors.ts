// Failures the CLI reports as one line on stderr, each with an exit code scripts can branch on:
//   0 done · 1 unexpected failure · 2 usage error · 3 the service answered "no" (sold out, insufficient,
//   user limit, not deducted, reconcile found drift) · 10 + N a gRPC error with status code N
//   (13 INVALID_ARGUMENT, 14 DEADLINE_EXCEEDED, 15 NOT_FOUND, 16 ALREADY_EXISTS, 19 FAILED_PRECONDITION, 22 UNIMPLEMENTED,
//   24 UNAVAILABLE, ...).
import { GrpcCode } from '../protocol/status-codes.js';

/** Status code -> name (UNAVAILABLE ...), without loading grpc-js. */
export const STATUS_NAMES: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(GrpcCode).map(([k, v]) => [v, k]));

export const EXIT = { ok: 0, failure: 1, usage: 2, refused: 3, grpcBase: 10 } as const;

export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
    /** The gRPC status name, for --json error objects. */
    readonly code?: string,
  ) {
    super(message);
  }
}

export class UsageError extends CliError {
  override name = 'UsageError';
  constructor(message: string) {
    super(message, EXIT.usage, 'USAGE');
  }
}

export function grpcCodeOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code in STATUS_NAMES ? code : undefined;
}

/** Turns a gRPC failure into one line saying what happened and what to do about it. */
export function fromGrpcError(err: unknown, ctx: { addr: string; method: string; deadlineMs?: number }): CliError {
  const code = grpcCodeOf(err);
  if (code === undefined) return new CliError(`${ctx.method} failed: ${(err as Error)?.message ?? String(err)}`);
  const name = STATUS_NAMES[code]!;
  // grpc-js connection failures read "No connection established. Last error: Error: connect ECONNREFUSED …
  // Resolution note: …": keep the cause.
  const raw = String((err as { details?: unknown }).details ?? '').trim();
  // One line: TLS errors from OpenSSL carry newlines.
  const details =
    (/Last error: (?:Error: )?(.*?)(?:\.?\s*Resolution note:.*)?$/s.exec(raw)?.[1] ?? raw).replace(/\s*\n\s*/g, ' ').trim() ||
    name.toLowerCase();
  const exit = EXIT.grpcBase + code;
  // The client retries transport failures (same request id) until --deadline: say how often it tried.
  const attempts = Number((err as { attempts?: unknown }).attempts ?? 1);
  const tried = attempts > 1 ? ` [${attempts} attempts]` : '';
  const say = (msg: string) => new CliError(`${name}: ${msg}${tried}`, exit, name);
  switch (code) {
    case GrpcCode.UNAVAILABLE:
      if (/SSL|TLS|certificate|handshake|wrong version number/i.test(raw)) {
        return say(
          `TLS with shardstock at ${ctx.addr} failed (${details}); check --tls, --ca, --cert and --key against the server's TLS settings`,
        );
      }
      if (/no connection established|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|getaddrinfo|name resolution/i.test(raw)) {
        return say(`cannot reach shardstock at ${ctx.addr} (${details}); is it running? set --addr or SHARDSTOCK_GRPC_ADDR`);
      }
      return say(`${details} — the service or a store behind it is unavailable; retry (same request id is safe)`);
    case GrpcCode.DEADLINE_EXCEEDED:
      return say(
        `${ctx.method} got no answer within ${ctx.deadlineMs ?? '?'} ms (${details}); retry with the same request id, or raise --deadline`,
      );
    case GrpcCode.UNIMPLEMENTED:
      return say(`${details} — this server does not implement ${ctx.method} yet`);
    case GrpcCode.ABORTED:
      return say(`${details}`);
    default:
      return say(details);
  }
}
