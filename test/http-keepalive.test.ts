// The HTTP port pings its HTTP/2 connections that have a stream open (src/transport/connection-timers.ts): a
// WatchStock client that went silent (gone without a FIN, or no longer reading its socket) is cut after one
// unanswered PING instead of holding its stream, and the messages queued on it, for the stream's lifetime. A
// client that answers keeps its stream.
import http2 from 'node:http2';
import { create, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, networkLimits } from '../src/config.js';
import { WatchStockRequestSchema, WatchStockResponseSchema } from '../src/gen/inventory/v1/inventory_pb.js';
import { inventoryRoutes } from '../src/transport/connect-routes.js';
import type { CallContext, InventoryHandlers } from '../src/transport/handlers.js';
import { startHttpServer, type HttpServer } from '../src/transport/http-server.js';
import { waitFor } from './support/settlement.js';
import { TcpProxy } from './support/tcp-proxy.js';

const KEEPALIVE_MS = 1000;
const KEEPALIVE_TIMEOUT_MS = 300;
/** Coupon ids of the WatchStock streams the server has ended, with when. */
const ended = new Map<string, number>();
const refusals: string[] = [];
const handlers = {
  watchStock: async function* (req: { couponId: string }, ctx: CallContext) {
    yield create(WatchStockResponseSchema, {});
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
    ended.set(req.couponId, Date.now());
  },
} as unknown as InventoryHandlers;

let server: HttpServer;
let proxy: TcpProxy;
beforeAll(async () => {
  const limits = networkLimits(
    loadConfig({ SHARDSTOCK_GRPC_KEEPALIVE_MS: String(KEEPALIVE_MS), SHARDSTOCK_GRPC_KEEPALIVE_TIMEOUT_MS: String(KEEPALIVE_TIMEOUT_MS) }),
  );
  server = await startHttpServer('127.0.0.1:0', {
    routes: inventoryRoutes(handlers, { onUnexpected: () => {} }),
    plain: [],
    maxMessageBytes: 65536,
    limits,
    onRefused: (reason) => refusals.push(reason),
  });
  proxy = new TcpProxy('127.0.0.1', server.port);
  await proxy.start();
});
afterAll(async () => {
  await proxy?.close();
  await server?.close(0);
});

/** Opens a WatchStock (gRPC framing) on `port` and resolves once its first message arrived. */
async function openWatch(port: number, couponId: string): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const body = toBinary(WatchStockRequestSchema, create(WatchStockRequestSchema, { couponId }));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  const stream = session.request({
    ':method': 'POST',
    ':path': '/inventory.v1.InventoryService/WatchStock',
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  stream.on('error', () => {});
  stream.end(frame);
  await new Promise<void>((resolve, reject) => {
    stream.once('data', () => resolve());
    stream.once('close', () => reject(new Error(`the ${couponId} stream closed before its first message`)));
  });
  return session;
}

describe('HTTP/2 keepalive on the HTTP port', () => {
  it('when a WatchStock client goes silent, then the server cuts it after one unanswered PING and a client that answers keeps its stream', async () => {
    const live = await openWatch(server.port, 'live');
    const silent = await openWatch(proxy.port, 'silent');
    const frozenAt = Date.now();
    proxy.freeze();
    await waitFor(
      'the silent stream to be ended',
      async () => ended.get('silent'),
      (at) => at !== undefined,
      10_000,
      50,
    );
    const after = ended.get('silent')! - frozenAt;
    expect(after).toBeLessThan(2 * KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS + 1000);
    expect(refusals).toContain('keepalive_timeout');
    // The live client answered the same pings: still open two intervals later.
    await new Promise((r) => setTimeout(r, 2 * KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS));
    expect(ended.has('live')).toBe(false);
    live.close();
    silent.destroy();
  });
});
