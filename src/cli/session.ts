// One command's connection to a shardstock instance: the address (flag, env, default), TLS and token, the
// per-call deadline, and calls whose gRPC failures come back as one-line CliErrors. Calls go through the
// retrying client (src/client): transport failures are retried with the same request id within --deadline.
import { readFileSync } from 'node:fs';
import { createShardstockClient, isLoopbackTarget, type CallOptions, type ShardstockClient, type TlsOptions } from '../client/index.js';
import { fromGrpcError, UsageError } from './errors.js';
import type { Io } from './io.js';
import { flag, int, str, type Parsed } from './options.js';

export const DEFAULT_ADDR = '127.0.0.1:50051';

export interface Session {
  addr: string;
  json: boolean;
  deadlineMs: number;
  client: ShardstockClient;
  /** The deadline for calls made directly on `client` (load runs: Ctrl-C lets calls in flight finish). */
  options(): CallOptions;
  /** Runs one call with the deadline; a gRPC error becomes a CliError naming `method`. */
  call<T>(method: string, fn: (o: CallOptions) => Promise<T>): Promise<T>;
  close(): void;
}

/** A server bound to every interface (0.0.0.0:50051 in its own env) is reached on loopback. */
export function connectAddr(raw: string): string {
  return raw.replace(/^(0\.0\.0\.0|\[::\]|::):/, '127.0.0.1:');
}

function pemFile(p: Parsed, name: string): Buffer | undefined {
  const path = str(p, name);
  if (path === undefined) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`--${name} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** --tls, or any of --ca / --cert / --key (which only make sense with TLS); undefined = plaintext. */
export function tlsOptions(p: Parsed): TlsOptions | undefined {
  const [ca, cert, key] = [pemFile(p, 'ca'), pemFile(p, 'cert'), pemFile(p, 'key')];
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('--cert and --key go together (a client certificate and its key)');
  if (!flag(p, 'tls') && !ca && !cert) return undefined;
  return { ca, cert, key };
}

export function openSession(p: Parsed, io: Io): Session {
  const addr = connectAddr(str(p, 'addr') ?? io.env.SHARDSTOCK_GRPC_ADDR ?? DEFAULT_ADDR);
  const deadlineMs = int(p, 'deadline', 10_000, 1, 3_600_000);
  const tls = tlsOptions(p);
  const token = str(p, 'token') ?? io.env.SHARDSTOCK_CLI_TOKEN;
  if (token && !tls && !isLoopbackTarget(addr)) {
    throw new UsageError(`refusing to send the token in plaintext to ${addr} (not loopback): add --tls (and --ca FILE for a private CA)`);
  }
  const client = createShardstockClient({ address: addr, tls, token: token || undefined, deadlineMs });
  const options = (): CallOptions => ({ deadlineMs });
  return {
    addr,
    json: flag(p, 'json'),
    deadlineMs,
    client,
    options,
    async call(method, fn) {
      try {
        return await fn({ ...options(), signal: io.signal });
      } catch (err) {
        throw fromGrpcError(err, { addr, method, deadlineMs });
      }
    },
    close: () => client.close(),
  };
}
