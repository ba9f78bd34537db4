// Turns the security settings into what the transports and clients take: TLS material read from the
// configured PEM files, and the call gate (auth, rate limit, in-flight bound) as a guard for each port.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { Config, TlsFiles } from '../config.js';
import { CallGate } from '../access/call-gate.js';
import { TokenRegistry } from '../access/tokens.js';

const read = (path: string | undefined) => (path === undefined ? undefined : readFileSync(path));

/** PEM contents for a TLS client (Redis, MySQL); undefined when TLS is off. */
export function tlsMaterial(
  files: TlsFiles | undefined,
): { ca?: Buffer | undefined; cert?: Buffer | undefined; key?: Buffer | undefined } | undefined {
  if (!files) return undefined;
  return { ca: read(files.caFile), cert: read(files.certFile), key: read(files.keyFile) };
}

/** TLS for the gRPC port, with client certificates required when a client CA is configured (mTLS). */
export function grpcServerCredentials(config: Readonly<Config>): grpc.ServerCredentials | undefined {
  const t = config.grpcTls;
  if (!t) return undefined;
  const ca = read(t.clientCaFile) ?? null;
  return grpc.ServerCredentials.createSsl(
    ca,
    [{ cert_chain: readFileSync(t.certFile), private_key: readFileSync(t.keyFile) }],
    ca !== null,
  );
}

export function callGate(config: Readonly<Config>): CallGate {
  return new CallGate({
    tokens: config.auth === 'token' ? new TokenRegistry(config.authTokens) : undefined,
    ratePerSec: config.rateLimitRps,
    burst: config.rateLimitBurst,
    maxInFlight: config.maxInFlight,
    streaming: new Set(['WatchStock']),
  });
}

/** The gate as the two transports' guard hooks. */
export function guards(gate: CallGate) {
  return {
    grpc: (method: string, metadata: grpc.Metadata, peer: string) => {
      const auth = metadata.get('authorization')[0];
      return gate.admit(method, { authorization: typeof auth === 'string' ? auth : undefined, peer });
    },
    connect: (method: string, headers: Headers, peer: string) =>
      gate.admit(method, { authorization: headers.get('authorization') ?? undefined, peer }),
  };
}
