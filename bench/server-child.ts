// A server under test, in its own process so its CPU is measured on its own:
//   shardstock  the real service (startApp) configured from SHARDSTOCK_* in the environment;
//   noop | single-key | lock | mysql   a baseline store behind the same startGrpcServer.
// Serves IPC ops for the orchestrator: create, levels, cpu, stats, stop (see bench/servers.ts).
import { loadConfig } from '../src/config.js';
import { startApp, type App } from '../src/app/app.js';
import { startGrpcServer, type GrpcServer } from '../src/transport/grpc-server.js';
import { createLogger } from '../src/util/logger.js';
import { baselineHandlers } from './baselines/handlers.js';
import { lockStore } from './baselines/lock.js';
import { mysqlOnlyStore } from './baselines/mysql-only.js';
import { noopStore } from './baselines/noop.js';
import { connectBaselineCluster, waitClusterReady } from './baselines/redis.js';
import { singleKeyStore } from './baselines/single-key.js';
import type { BaselineStore } from './baselines/store.js';
import { serveIpc } from './child.js';
import type { CouponLevel, CouponSpec, CpuSample, ServerReady } from './design.js';
import { mapLimit } from './pool.js';

interface Served {
  port: number;
  create(coupons: CouponSpec[]): Promise<void>;
  levels(ids: string[]): Promise<CouponLevel[]>;
  stats(): Record<string, number>;
  close(): Promise<void>;
}

async function serveService(): Promise<Served> {
  const config = loadConfig(process.env);
  const app: App = await startApp(config, createLogger(config.logLevel));
  return {
    port: app.grpcPort,
    async create(coupons) {
      await mapLimit(coupons, 32, (c) => app.admin.create({ couponId: c.id, totalStock: BigInt(c.stock), shardCount: c.shards, perUserLimit: 0 }));
    },
    async levels(ids) {
      return mapLimit(ids, 32, async (id) => {
        const l = await app.admin.level(id, false);
        return { id, stock: l.totalStock, sold: l.deducted, settled: l.totalStock - l.settledRemaining };
      });
    },
    stats: () => ({ ...app.deduct.stats }),
    close: () => app.close(),
  };
}

async function serveBaseline(design: string): Promise<Served> {
  const config = loadConfig(process.env);
  const ns = process.env.BENCH_NAMESPACE ?? 'bench';
  let store: BaselineStore;
  let redis: ReturnType<typeof connectBaselineCluster> | undefined;
  if (design === 'noop') store = noopStore();
  else if (design === 'mysql') store = await mysqlOnlyStore(config.mysqlUrl);
  else {
    redis = connectBaselineCluster(config.redisNodes);
    await waitClusterReady(redis);
    store = design === 'lock' ? lockStore(redis, ns) : singleKeyStore(redis, ns);
  }
  const log = createLogger(config.logLevel, { design });
  const grpc: GrpcServer = await startGrpcServer('127.0.0.1:0', baselineHandlers(store), {
    maxMessageBytes: config.maxMessageBytes,
    onUnexpected: (method, err) => log.error({ method, err }, 'call failed'),
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
      await redis?.quit();
    },
  };
}

const design = process.argv[2] ?? '';
try {
  const served = design === 'shardstock' ? await serveService() : await serveBaseline(design);
  serveIpc({
    create: (a: { coupons: CouponSpec[] }) => served.create(a.coupons),
    levels: (a: { ids: string[] }) => served.levels(a.ids),
    cpu: async (): Promise<CpuSample> => {
      const c = process.cpuUsage();
      return { userUs: c.user, systemUs: c.system };
    },
    stats: async () => served.stats(),
    stop: async () => {
      await served.close();
      // Exit after the reply is out; --cpu-prof writes its profile on a normal exit.
      setTimeout(() => process.exit(0), 50);
    },
  });
  const ready: ServerReady = { type: 'ready', port: served.port, pid: process.pid };
  process.send!(ready);
} catch (err) {
  process.send!({ type: 'failed', error: (err as Error).stack ?? String(err) });
  setTimeout(() => process.exit(1), 50);
}
