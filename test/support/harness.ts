// Starts a real service instance in-process on random ports, in its own key namespace / JetStream stream, so
// each test file works on real Redis Cluster, NATS JetStream and MariaDB without seeing the others' data.
import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../src/config.js';
import { startApp, type App, type AppOptions } from '../../src/app/app.js';
import { createInventoryClient, type InventoryClient } from '../../src/client/grpc-client.js';
import { createLogger } from '../../src/util/logger.js';
import { instanceLogSink } from './instance-logs.js';

export const TEST_DB_URL = 'mysql://root@127.0.0.1:3306/shardstock_test';

export function uniqueId(prefix = 'c'): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

export interface TestApp {
  app: App;
  client: InventoryClient;
  grpcAddr: string;
  httpUrl: string;
  namespace: string;
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function startTestApp(env: Record<string, string> = {}, options: AppOptions = {}): Promise<TestApp> {
  const namespace = env.SHARDSTOCK_NAMESPACE ?? `t${randomBytes(4).toString('hex')}`;
  const fullEnv: Record<string, string> = {
    SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
    SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
    SHARDSTOCK_MYSQL_URL: TEST_DB_URL,
    SHARDSTOCK_NAMESPACE: namespace,
    SHARDSTOCK_WORKERS: 'none',
    SHARDSTOCK_LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...env,
  };
  const config: Readonly<Config> = loadConfig(fullEnv);
  // Child processes that get `env` keep SHARDSTOCK_LOG_LEVEL (silent): tests read their stdout. In process, the
  // warnings go to a buffer that a failing test prints (failure-logs.ts).
  const log = process.env.TEST_LOG_LEVEL
    ? createLogger(config.logLevel)
    : createLogger('warn', { instance: config.instanceId }, instanceLogSink);
  const app = await startApp(config, log, options);
  const grpcAddr = `127.0.0.1:${app.grpcPort}`;
  const client = createInventoryClient(grpcAddr);
  return {
    app,
    client,
    grpcAddr,
    httpUrl: `http://127.0.0.1:${app.httpPort}`,
    namespace,
    env: fullEnv,
    async close() {
      client.close();
      await app.close();
    },
  };
}
