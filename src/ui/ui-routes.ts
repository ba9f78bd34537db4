// The live stock page on the HTTP port: GET / (and /ui/) serves the page, /ui/app.js its script, and
// /ui/coupons the most recent coupons as JSON. The page itself talks to WatchStock over Connect.
import { readFileSync } from 'node:fs';
import type { PlainRoute } from '../transport/http-server.js';

const STATIC = new URL('./static/', import.meta.url);

export interface CouponSummary {
  couponId: string;
  totalStock: number;
  shardCount: number;
  createdAt: string;
}

export interface UiOptions {
  /** Newest first, at most `limit`. */
  listCoupons(limit: number): Promise<CouponSummary[]>;
}

const LIST_LIMIT = 50;

export function uiRoutes(options: UiOptions): PlainRoute {
  // Read once: the files are part of the build, and a request must never touch the disk.
  const files = new Map<string, { type: string; body: Buffer }>([
    ['/', { type: 'text/html; charset=utf-8', body: readFileSync(new URL('index.html', STATIC)) }],
    ['/ui/', { type: 'text/html; charset=utf-8', body: readFileSync(new URL('index.html', STATIC)) }],
    ['/ui/app.js', { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('app.js', STATIC)) }],
  ]);
  return async (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const path = (req.url ?? '/').split('?')[0]!;
    const file = files.get(path);
    if (file) {
      res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' });
      res.end(req.method === 'HEAD' ? undefined : file.body);
      return true;
    }
    if (path === '/ui/coupons') {
      const coupons = await options.listCoupons(LIST_LIMIT);
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(coupons));
      return true;
    }
    return false;
  };
}
