// What an instance tells the outside about itself while it runs: readiness (polled pings of its dependencies),
// served on /healthz and /readyz and mirrored into grpc.health.v1.
import type { Connections } from './connect.js';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import type { PlainRoute } from '../transport/http-server.js';
import type { Logger } from '../util/logger.js';
import { Readiness } from './readiness.js';

/** Redis decides readiness; MySQL and NATS only degrade it (events wait in the outbox meanwhile). */
export function dependencyReadiness(c: Connections): Readiness {
  return new Readiness([
    { name: 'redis', ping: () => c.redis.ping() },
    { name: 'mysql', ping: () => c.orm.em.fork().getConnection().execute('select 1'), critical: false },
    { name: 'nats', ping: () => c.nats.flush(), critical: false },
  ]);
}

/** /healthz: the process answers. /readyz: whether it should get traffic, and which dependency fails. */
export function healthRoute(readiness: Readiness): PlainRoute {
  return (req, res) => {
    if (req.url !== '/healthz' && req.url !== '/readyz') return false;
    const state = readiness.publicView();
    const ok = req.url === '/healthz' || state.ready;
    res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
    res.end(JSON.stringify(req.url === '/healthz' ? { status: 'ok' } : state));
    return true;
  };
}

export interface HealthStatus {
  setStatus(service: string, status: 'SERVING' | 'NOT_SERVING'): void;
}

/** Keeps grpc.health.v1 (the server and the inventory service) in step with readiness; logs every change. */
export function followReadiness(readiness: Readiness, health: HealthStatus, log: Logger): void {
  readiness.onChange((ready) => {
    setServing(health, ready);
    log.info({ ready, checks: readiness.current().checks }, 'readiness changed');
  });
}

export function setServing(health: HealthStatus, serving: boolean): void {
  const status = serving ? 'SERVING' : 'NOT_SERVING';
  health.setStatus('', status);
  health.setStatus(InventoryService.typeName, status);
}
