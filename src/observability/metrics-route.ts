// GET /metrics on the HTTP port, in the Prometheus text format.
import type { PlainRoute } from '../transport/http-server.js';
import type { Metrics } from './metrics.js';

export function metricsRoute(metrics: Metrics): PlainRoute {
  return async (req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') return false;
    const { contentType, body } = await metrics.render();
    res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
    res.end(body);
    return true;
  };
}
