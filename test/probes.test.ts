// The probes the deploy manifests use, against a real instance: Kubernetes' gRPC probes (readiness on the
// service name, liveness/startup on `liveness`) and the Docker HEALTHCHECK script (deploy/healthcheck.mjs).
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InventoryService } from '../src/gen/inventory/v1/inventory_pb.js';
import { LIVENESS_SERVICE } from '../src/transport/grpc-server.js';
import { startTestApp, type TestApp } from './support/harness.js';

const nm = (p: string) => fileURLToPath(new URL(`../node_modules/${p}`, import.meta.url));
const HEALTHCHECK = fileURLToPath(new URL('../deploy/healthcheck.mjs', import.meta.url));

let t: TestApp;
type HealthReply = { status: string };
let health: grpc.Client & {
  Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: HealthReply) => void): void;
};
beforeAll(async () => {
  t = await startTestApp();
  const def = protoLoader.loadSync(nm('grpc-health-check/proto/health/v1/health.proto'), {
    includeDirs: [nm('grpc-health-check/proto')],
    enums: String,
  });
  // biome-ignore lint/suspicious/noExplicitAny: a package definition loaded at run time, walked by name
  const Health = (grpc.loadPackageDefinition(def) as any).grpc.health.v1.Health as grpc.ServiceClientConstructor;
  health = new Health(t.grpcAddr, grpc.credentials.createInsecure()) as never;
});
afterAll(async () => {
  health?.close();
  await t?.close();
});

const check = (service: string) =>
  new Promise<string>((resolve) =>
    health.Check({ service }, (err: grpc.ServiceError | null, res: { status: string }) =>
      resolve(err ? grpc.status[err.code] : res.status),
    ),
  );

const healthcheck = (httpAddr: string) =>
  new Promise<number>((resolve) =>
    execFile(process.execPath, [HEALTHCHECK], { env: { ...process.env, SHARDSTOCK_HTTP_ADDR: httpAddr }, timeout: 20_000 }, (err) =>
      resolve(err ? (typeof err.code === 'number' ? err.code : -1) : 0),
    ),
  );

describe('probes used by deploy/', () => {
  it('when the instance is ready, then the readiness name and the liveness name both answer SERVING, an unknown name NOT_FOUND', async () => {
    expect(await check(InventoryService.typeName)).toBe('SERVING');
    expect(await check('')).toBe('SERVING');
    expect(await check(LIVENESS_SERVICE)).toBe('SERVING');
    expect(await check('no.such.Service')).toBe('NOT_FOUND');
  });

  it('when the Docker healthcheck script runs, then it exits 0 against /readyz of a ready instance and 1 when nothing listens', async () => {
    const httpPort = new URL(t.httpUrl).port;
    expect(await healthcheck(`0.0.0.0:${httpPort}`)).toBe(0);
    const closed = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    expect(await healthcheck(`127.0.0.1:${closed}`)).toBe(1);
  });
});
