// One command's connection to a shardstock instance: the address (flag, env, default), the per-call
// deadline, and calls whose gRPC failures come back as one-line CliErrors.
import { createInventoryClient, type CallOptions, type InventoryClient } from '../client/grpc-client.js';
import { fromGrpcError } from './errors.js';
import type { Io } from './io.js';
import { flag, int, str, type Parsed } from './options.js';

export const DEFAULT_ADDR = '127.0.0.1:50051';

export interface Session {
  addr: string;
  json: boolean;
  deadlineMs: number;
  client: InventoryClient;
  /** Deadline + credentials for calls made directly on `client` (load runs). */
  options(): CallOptions;
  /** Runs one unary call with the deadline; a gRPC error becomes a CliError naming `method`. */
  call<T>(method: string, fn: (o: CallOptions) => Promise<T>): Promise<T>;
  close(): void;
}

/** A server bound to every interface (0.0.0.0:50051 in its own env) is reached on loopback. */
export function connectAddr(raw: string): string {
  return raw.replace(/^(0\.0\.0\.0|\[::\]|::):/, '127.0.0.1:');
}

export function openSession(p: Parsed, io: Io): Session {
  const addr = connectAddr(str(p, 'addr') ?? io.env.SHARDSTOCK_GRPC_ADDR ?? DEFAULT_ADDR);
  const deadlineMs = int(p, 'deadline', 10_000, 1, 3_600_000);
  const client = createInventoryClient(addr);
  const token = str(p, 'token') ?? io.env.SHARDSTOCK_CLI_TOKEN;
  const metadata = token ? { authorization: `Bearer ${token}` } : undefined;
  const options = (): CallOptions => ({ deadlineMs, ...(metadata ? { metadata } : {}) });
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
