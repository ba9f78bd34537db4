// The live stock page on the HTTP port: GET / (and /ui/) serves the page, /ui/app.js its script, and
// /ui/coupons the most recent coupons as JSON. The page itself talks to WatchStock over Connect.
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { Code } from '@connectrpc/connect';
import { codeToHttpStatus } from '@connectrpc/connect/protocol-connect';
import type { PlainRoute } from '../transport/http-server.js';
import { toStatus } from '../transport/status.js';

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
  /** The call gate for the coupon list (auth, rate limit, in-flight): throws a DomainError to refuse, else
   *  returns the function that ends the call. The static files stay open: they hold no data. */
  admit?: ((req: IncomingMessage) => () => void) | undefined;
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
      let release: (() => void) | undefined;
      try {
        release = options.admit?.(req);
      } catch (err) {
        // The same answer a Connect call gets: HTTP status of the code, JSON {code, message}, retry-after-ms.
        const s = toStatus(err);
        res.writeHead(codeToHttpStatus(s.code as Code), { 'content-type': 'application/json', ...s.metadata });
        res.end(JSON.stringify({ code: Code[s.code]?.replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase(), message: s.message }));
        return true;
      }
      try {
        const coupons = await options.listCoupons(LIST_LIMIT);
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify(coupons));
      } finally {
        release?.();
      }
      return true;
    }
    return false;
  };
}
