// Argument parsing on node:util parseArgs: every command declares its own options on top of the common ones
// (--addr, --token, TLS, --json, --deadline, --help) and reads them through typed helpers that fail with a UsageError.
import { parseArgs } from 'node:util';
import { UsageError } from './errors.js';

export type OptionSpec = Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: false }>;

export const COMMON_OPTIONS: OptionSpec = {
  addr: { type: 'string' },
  token: { type: 'string' },
  tls: { type: 'boolean' },
  ca: { type: 'string' },
  cert: { type: 'string' },
  key: { type: 'string' },
  json: { type: 'boolean' },
  deadline: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

export const COMMON_HELP = `Common options:
  --addr HOST:PORT   gRPC address of a shardstock instance (default: $SHARDSTOCK_GRPC_ADDR or 127.0.0.1:50051)
  --token TOKEN      bearer token when the service runs with SHARDSTOCK_AUTH=token (default: $SHARDSTOCK_CLI_TOKEN);
                     sent in plaintext only to a loopback address, else --tls is required
  --tls              TLS to the gRPC port (the system's CAs unless --ca)
  --ca FILE          CA certificate (PEM) that signed the server's certificate; implies --tls
  --cert FILE        client certificate (PEM) for a server that requires mTLS, with --key FILE; implies --tls
  --json             machine-readable output: one JSON object per line on stdout
  --deadline MS      deadline of each call in milliseconds, retries of transport failures (same request id)
                     included (default 10000)
  -h, --help         this help`;

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

export function parse(argv: string[], options: OptionSpec): Parsed {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: { ...COMMON_OPTIONS, ...options },
      allowPositionals: true,
      strict: true,
    });
    return { values: values as Parsed['values'], positionals };
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
}

export function str(p: Parsed, name: string): string | undefined {
  const v = p.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function flag(p: Parsed, name: string): boolean {
  return p.values[name] === true;
}

/** An integer option in [min, max]; `def` when absent (undefined def = required). */
export function int(p: Parsed, name: string, def: number | undefined, min: number, max: number): number {
  const raw = str(p, name);
  if (raw === undefined) {
    if (def === undefined) throw new UsageError(`--${name} is required`);
    return def;
  }
  // Digits only (1_000 allowed): Number() reads '' and blanks as 0 and takes hex and exponents, so an unset
  // shell variable in `--stock "$STOCK"` created a coupon of 0 units, whose stock cannot be defined again.
  const v = /^[0-9][0-9_]*$/.test(raw) ? Number(raw.replace(/_/g, '')) : NaN;
  if (!Number.isInteger(v) || v < min || v > max)
    throw new UsageError(`--${name} must be an integer in ${min}..${max}, got ${JSON.stringify(raw)}`);
  return v;
}

export function positional(p: Parsed, index: number, name: string): string {
  const v = p.positionals[index];
  if (v === undefined || v === '') throw new UsageError(`missing <${name}>`);
  return v;
}

export function noMorePositionals(p: Parsed, count: number): void {
  if (p.positionals.length > count) throw new UsageError(`unexpected argument ${JSON.stringify(p.positionals[count])}`);
}
