// Turns the security settings into what the transports and clients take: TLS material read from the
// configured PEM files, and the call gate (auth, rate limit, in-flight bound) the call chain runs first.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { type ConnectionOptions, credsAuthenticator, nkeyAuthenticator } from 'nats';
import type { Config, TlsFiles } from '../config.js';
import { CallGate, type RefusalReason } from '../access/call-gate.js';
import { TokenRegistry } from '../access/tokens.js';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';

const read = (path: string | undefined) => (path === undefined ? undefined : readFileSync(path));

/** PEM contents for a TLS client (Redis, MySQL); undefined when TLS is off. */
export function tlsMaterial(
  files: TlsFiles | undefined,
): { ca?: Buffer | undefined; cert?: Buffer | undefined; key?: Buffer | undefined } | undefined {
  if (!files) return undefined;
  return { ca: read(files.caFile), cert: read(files.certFile), key: read(files.keyFile) };
}

/** NATS connection options for the configured credentials and TLS (every NATS connection uses them). */
export function natsSecurity(config: Readonly<Config>): Partial<ConnectionOptions> {
  const out: Partial<ConnectionOptions> = {};
  const a = config.natsAuth;
  if (a?.kind === 'user') Object.assign(out, { user: a.user, pass: a.password });
  if (a?.kind === 'token') out.token = a.token;
  if (a?.kind === 'nkey') out.authenticator = nkeyAuthenticator(new TextEncoder().encode(readFileSync(a.seedFile, 'utf8').trim()));
  if (a?.kind === 'creds') out.authenticator = credsAuthenticator(readFileSync(a.credsFile));
  const t = config.natsTls;
  if (t) {
    out.tls = {
      ...(t.caFile ? { caFile: t.caFile } : {}),
      ...(t.certFile ? { certFile: t.certFile } : {}),
      ...(t.keyFile ? { keyFile: t.keyFile } : {}),
    };
  }
  return out;
}

/** TLS for the gRPC port, with client certificates required when a client CA is configured (mTLS). With a
 * reload interval, grpc-js re-reads the files on that interval and new connections get the new certificate. */
export function grpcServerCredentials(config: Readonly<Config>): grpc.ServerCredentials | undefined {
  const t = config.grpcTls;
  if (!t) return undefined;
  if (config.grpcTlsReloadMs > 0) {
    const refreshIntervalMs = config.grpcTlsReloadMs;
    const identity = new grpc.experimental.FileWatcherCertificateProvider({
      certificateFile: t.certFile,
      privateKeyFile: t.keyFile,
      refreshIntervalMs,
    });
    const clientCa = t.clientCaFile
      ? new grpc.experimental.FileWatcherCertificateProvider({ caCertificateFile: t.clientCaFile, refreshIntervalMs })
      : null;
    // grpc-js 1.14 hands this function's first two arguments to the credentials' constructor in the order
    // (identity, ca), whatever their names say; test/tls.test.ts proves the pairing (TLS, mTLS, rotation).
    return grpc.experimental.createCertificateProviderServerCredentials(identity, clientCa as never, clientCa !== null);
  }
  const ca = read(t.clientCaFile) ?? null;
  return grpc.ServerCredentials.createSsl(
    ca,
    [{ cert_chain: readFileSync(t.certFile), private_key: readFileSync(t.keyFile) }],
    ca !== null,
  );
}

/** RPCs that stay open as long as the client wants: the service's server-streaming RPCs (WatchStock), taken
 *  from the descriptor, plus grpc.health.v1 Watch and server reflection. */
export const STREAMING_METHODS: ReadonlySet<string> = new Set([
  ...InventoryService.methods.filter((m) => m.methodKind === 'server_streaming').map((m) => m.name),
  'Watch',
  'ServerReflectionInfo',
]);

export function callGate(config: Readonly<Config>, onRefused?: (reason: RefusalReason, transport: string | undefined) => void): CallGate {
  return new CallGate({
    tokens: config.auth === 'token' ? new TokenRegistry(config.authTokens) : undefined,
    ratePerSec: config.rateLimitRps,
    burst: config.rateLimitBurst,
    maxInFlight: config.maxInFlight,
    streaming: STREAMING_METHODS,
    streams: { max: config.maxStreams, perCaller: config.maxStreamsPerCaller },
    onRefused,
  });
}

/** The gate for the HTTP port's plain routes (the live page); RPCs pass it in the call chain. */
export function guards(gate: CallGate) {
  return {
    http: (method: string, authorization: string | undefined, peer: string) =>
      gate.admit(method, { authorization, peer, transport: 'connect' }),
  };
}
