// Opens the three connections an instance needs: Redis Cluster (waited for until ready), MySQL, NATS. When
// NATS refuses (credentials, no server), what is already open is closed so it cannot keep the process alive.
import type { MikroORM } from '@mikro-orm/mysql';
import type { Cluster } from 'ioredis';
import { connect as connectNats, type NatsConnection } from 'nats';
import type { Config } from '../config.js';
import { openOrm } from '../db/orm.js';
import { connectCluster } from '../redis/cluster.js';
import type { Logger } from '../util/logger.js';
import { natsSecurity, tlsMaterial } from './security.js';

export interface Connections {
  redis: Cluster;
  orm: MikroORM;
  nats: NatsConnection;
}

const REDIS_READY_TIMEOUT_MS = 15_000;

async function waitReady(redis: Cluster, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`Redis Cluster not ready after ${timeoutMs} ms`)), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export async function connectAll(config: Readonly<Config>, log: Logger): Promise<Connections> {
  const redis = connectCluster({
    nodes: config.redisNodes,
    username: config.redisUsername,
    password: config.redisPassword,
    tls: tlsMaterial(config.redisTls),
  });
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis cluster error'));
  await waitReady(redis, REDIS_READY_TIMEOUT_MS);
  const orm = await openOrm({ url: config.mysqlUrl, tls: tlsMaterial(config.mysqlTls) });
  const nats = await connectNats({
    servers: config.natsUrl.split(','),
    name: `shardstock-${config.instanceId}`,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    ...natsSecurity(config),
  }).catch(async (err: unknown) => {
    redis.disconnect();
    await orm.close(true);
    throw err;
  });
  return { redis, orm, nats };
}

/** Last step of a shutdown: NATS drained, Redis and MySQL closed. */
export async function closeAll(c: Connections): Promise<void> {
  await c.nats.drain().catch(() => c.nats.close());
  await c.redis.quit().catch(() => c.redis.disconnect());
  await c.orm.close(true);
}
