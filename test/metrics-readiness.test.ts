// Readiness follows Redis for real: an instance on a private Redis Cluster (ports 7201-7206, never the
// shared one) reports not ready on /readyz, grpc.health.v1 and /metrics when every node is stopped, and
// ready again once they are back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { clusterHealthy, createRedisCluster, portOpen, readPid, startRedisNode, waitFor } from '../deploy/local/stack.js';
import { startTestApp, type TestApp } from './support/harness.js';

const PORTS = [7201, 7202, 7203, 7204, 7205, 7206];
const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const dirOf = (port: number) => join(ROOT, '.data', 'readiness', 'redis', String(port));
const nm = (p: string) => fileURLToPath(new URL(`../node_modules/${p}`, import.meta.url));

let t: TestApp;
type HealthReply = { status: string };
let health: grpc.Client & {
  Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: HealthReply) => void): void;
};

beforeAll(async () => {
  await createRedisCluster(PORTS, dirOf);
  t = await startTestApp({ SHARDSTOCK_REDIS_NODES: PORTS.map((p) => `127.0.0.1:${p}`).join(',') });
  const def = protoLoader.loadSync(nm('grpc-health-check/proto/health/v1/health.proto'), {
    includeDirs: [nm('grpc-health-check/proto')],
    enums: String,
  });
  // biome-ignore lint/suspicious/noExplicitAny: a package definition loaded at run time, walked by name
  const Health = (grpc.loadPackageDefinition(def) as any).grpc.health.v1.Health as grpc.ServiceClientConstructor;
  health = new Health(t.grpcAddr, grpc.credentials.createInsecure()) as never;
}, 90_000);

afterAll(async () => {
  health?.close();
  await t?.close();
  for (const port of PORTS) {
    const pid = readPid(join(dirOf(port), 'redis.pid'));
    if (pid) process.kill(pid, 'SIGKILL');
  }
  await waitFor(
    'private redis nodes to exit',
    async () => (await Promise.all(PORTS.map((p) => portOpen(p)))).every((o) => !o),
    10_000,
  ).catch(() => {});
  rmSync(join(ROOT, '.data', 'readiness'), { recursive: true, force: true });
});

const grpcStatus = () =>
  new Promise<string>((res, rej) =>
    health.Check({ service: 'inventory.v1.InventoryService' }, (err: Error | null, r: { status: string }) =>
      err ? rej(err) : res(r.status),
    ),
  );

async function state() {
  const readyz = await fetch(`${t.httpUrl}/readyz`);
  const body = (await readyz.json()) as { ready: boolean; checks: Record<string, { ok: boolean }> };
  const metrics = await (await fetch(`${t.httpUrl}/metrics`)).text();
  return {
    http: readyz.status,
    ready: body.ready,
    redisOk: body.checks.redis?.ok,
    grpc: await grpcStatus(),
    metricReady: /^shardstock_ready (\d)/m.exec(metrics)?.[1],
    metricRedis: /^shardstock_dependency_up\{dependency="redis"\} (\d)/m.exec(metrics)?.[1],
    healthz: (await fetch(`${t.httpUrl}/healthz`)).status,
  };
}

async function waitState(want: boolean) {
  let last: Awaited<ReturnType<typeof state>> | undefined;
  await waitFor(
    `readiness ${want}`,
    async () => {
      last = await state();
      return last.ready === want && last.grpc === (want ? 'SERVING' : 'NOT_SERVING');
    },
    30_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last state ${JSON.stringify(last)}`);
  });
  return last!;
}

describe('readiness', () => {
  it('when every Redis node is stopped, then /readyz, grpc.health.v1 and /metrics all say not ready (liveness stays up); when they return, all say ready again', async () => {
    expect(await waitState(true)).toEqual({
      http: 200,
      ready: true,
      redisOk: true,
      grpc: 'SERVING',
      metricReady: '1',
      metricRedis: '1',
      healthz: 200,
    });

    for (const port of PORTS) process.kill(readPid(join(dirOf(port), 'redis.pid'))!, 'SIGKILL');
    await waitFor('private redis nodes to exit', async () => (await Promise.all(PORTS.map((p) => portOpen(p)))).every((o) => !o), 10_000);
    expect(await waitState(false)).toEqual({
      http: 503,
      ready: false,
      redisOk: false,
      grpc: 'NOT_SERVING',
      metricReady: '0',
      metricRedis: '0',
      healthz: 200,
    });

    // Restarted from their nodes.conf and AOF: the same cluster, same slots, same data.
    for (const port of PORTS) startRedisNode(port, dirOf(port));
    await waitFor('private cluster healthy again', async () => clusterHealthy(PORTS), 30_000);
    expect(await waitState(true)).toEqual({
      http: 200,
      ready: true,
      redisOk: true,
      grpc: 'SERVING',
      metricReady: '1',
      metricRedis: '1',
      healthz: 200,
    });
  });
});
