// A process that hosts servers under test, so their CPU is measured apart from the load generator:
//   shardstock  the real service (startApp) configured from the SHARDSTOCK_* env given for it;
//   noop | single-key | lock | mysql   a baseline store behind the same startGrpcServer.
// One process may host several servers (only one is under load at a time; module loading is most of a
// start-up on a small box, so the benchmark groups them). IPC ops: preload, start, create, levels, stats, stop, cpu, exit.
// Each design imports only what it needs.
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/util/logger.js';
import type { BaselineStore } from './baselines/store.js';
import { serveIpc } from './child.js';
import type { CouponLevel, CouponSpec, CpuSample } from './design.js';
import { mapLimit } from './pool.js';

type Env = Record<string, string | undefined>;

interface Served {
  port: number;
  create(coupons: CouponSpec[]): Promise<void>;
  levels(ids: string[]): Promise<CouponLevel[]>;
  stats(): Record<string, number>;
  close(): Promise<void>;
}

async function serveService(env: Env): Promise<Served> {
  const config = loadConfig(env);
  const { startApp } = await import('../src/app/app.js');
  const app = await startApp(config, createLogger(config.logLevel));
  return {
    port: app.grpcPort,
    async create(coupons) {
      await mapLimit(coupons, 32, (c) =>
        app.admin.create({ couponId: c.id, totalStock: BigInt(c.stock), shardCount: c.shards, perUserLimit: 0 }),
      );
    },
    async levels(ids) {
      return mapLimit(ids, 32, async (id) => {
        const l = await app.admin.level(id, false);
        return { id, stock: l.totalStock, sold: l.deducted, settled: l.totalStock - l.settledRemaining };
      });
    },
    stats: () => ({ ...app.deduct.stats, ...app.store.recordReadStats(), ...app.store.batchStats() }),
    close: () => app.close(),
  };
}

async function baselineStore(design: string, env: Env): Promise<{ store: BaselineStore; close(): Promise<void> }> {
  const config = loadConfig(env);
  const ns = env.BENCH_NAMESPACE ?? 'bench';
  if (design === 'noop') return { store: (await import('./baselines/noop.js')).noopStore(), close: async () => {} };
  if (design === 'mysql')
    return { store: await (await import('./baselines/mysql-only.js')).mysqlOnlyStore(config.mysqlUrl), close: async () => {} };
  if (design === 'lock' || design === 'single-key') {
    const { connectBaselineCluster, waitClusterReady } = await import('./baselines/redis.js');
    const cluster = connectBaselineCluster(config.redisNodes);
    await waitClusterReady(cluster);
    const store =
      design === 'lock'
        ? (await import('./baselines/lock.js')).lockStore(cluster, ns)
        : (await import('./baselines/single-key.js')).singleKeyStore(cluster, ns);
    return { store, close: async () => void (await cluster.quit()) };
  }
  throw new Error(`unknown design ${JSON.stringify(design)}`);
}

async function serveBaseline(design: string, env: Env): Promise<Served> {
  const config = loadConfig(env);
  const { grpcNetwork, startGrpcServer } = await import('../src/transport/grpc-server.js');
  const { baselineHandlers } = await import('./baselines/handlers.js');
  const { store, close } = await baselineStore(design, env);
  const log = createLogger(config.logLevel, { design });
  const grpc = await startGrpcServer('127.0.0.1:0', baselineHandlers(store), {
    maxMessageBytes: config.maxMessageBytes,
    onUnexpected: (method, err) => log.error({ method, err }, 'call failed'),
    // The same connection limits as the service under test (serviceEnv).
    network: grpcNetwork(config),
  });
  grpc.health.setStatus('', 'SERVING');
  return {
    port: grpc.port,
    create: (coupons) => store.create(coupons),
    async levels(ids) {
      return (await store.levels(ids)).map((l) => ({ id: l.id, stock: l.stock, sold: l.stock - l.remaining }));
    },
    stats: () => ({}),
    async close() {
      await new Promise<void>((r) => grpc.server.tryShutdown(() => r()));
      await store.close();
      await close();
    },
  };
}

const servers = new Map<string, Served>();

function served(label: string): Served {
  const s = servers.get(label);
  if (!s) throw new Error(`no server ${label} in this process`);
  return s;
}

serveIpc({
  /** Loads the modules the given designs need, so processes can do it side by side before any server starts. */
  preload: async (a: { designs: string[] }) => {
    if (a.designs.includes('shardstock')) await import('../src/app/app.js');
    if (a.designs.some((d) => d !== 'shardstock'))
      await Promise.all([import('../src/transport/grpc-server.js'), import('./baselines/handlers.js')]);
  },
  start: async (a: { label: string; design: string; env: Record<string, string> }) => {
    const env = { ...process.env, ...a.env };
    const s = a.design === 'shardstock' ? await serveService(env) : await serveBaseline(a.design, env);
    servers.set(a.label, s);
    return { port: s.port };
  },
  create: (a: { label: string; coupons: CouponSpec[] }) => served(a.label).create(a.coupons),
  levels: (a: { label: string; ids: string[] }) => served(a.label).levels(a.ids),
  stats: async (a: { label: string }) => served(a.label).stats(),
  stop: async (a: { label: string }) => {
    const s = servers.get(a.label);
    servers.delete(a.label);
    await s?.close();
  },
  cpu: async (): Promise<CpuSample> => {
    const c = process.cpuUsage();
    return { userUs: c.user, systemUs: c.system };
  },
  exit: async () => {
    await Promise.all([...servers.values()].map((s) => s.close().catch(() => {})));
    servers.clear();
    // Exit after the reply is out; --cpu-prof writes its profile on a normal exit.
    setTimeout(() => process.exit(0), 50);
  },
});
process.send!({ type: 'ready', pid: process.pid });
