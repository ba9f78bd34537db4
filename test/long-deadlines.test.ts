// Deadlines at and past Node's longest timer (2^31 ms, about 24.8 days) and deadlines that pass on a stream, on
// both ports. grpc-js reads grpc-timeout as a 32-bit integer and connect-node hands it to setTimeout, so without
// the clamp (src/transport/deadline-header.ts) a 30-day deadline was refused DEADLINE_EXCEEDED at once on the
// gRPC port and ended a WatchStock after ~1 ms with OK on the HTTP port; and a WatchStock on the HTTP port whose
// deadline passed ended OK, which tells a client to reconnect at once.
import http2 from 'node:http2';
import { create } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DeductOutcome,
  DeductRequestSchema,
  DeductResponseSchema,
  WatchStockRequestSchema,
  WatchStockResponseSchema,
} from '../src/gen/inventory/v1/inventory_pb.js';
import { inventoryRoutes } from '../src/transport/connect-routes.js';
import { startGrpcServer, type GrpcServer } from '../src/transport/grpc-server.js';
import type { CallContext, InventoryHandlers } from '../src/transport/handlers.js';
import { startHttpServer, type HttpServer } from '../src/transport/http-server.js';
import { message } from './support/grpc-frame.js';

const handlers = {
  deduct: async () => create(DeductResponseSchema, { outcome: DeductOutcome.DEDUCTED }),
  // One level, then open until the call's signal aborts (its deadline, or the client leaving).
  watchStock: async function* (_req: unknown, ctx: CallContext) {
    yield create(WatchStockResponseSchema, {});
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
  },
} as unknown as InventoryHandlers;

let grpcServer: GrpcServer;
let httpServer: HttpServer;
beforeAll(async () => {
  grpcServer = await startGrpcServer('127.0.0.1:0', handlers, { maxMessageBytes: 65536, onUnexpected: () => {} });
  httpServer = await startHttpServer('127.0.0.1:0', {
    routes: inventoryRoutes(handlers, { onUnexpected: () => {} }),
    plain: [],
    maxMessageBytes: 65536,
  });
});
afterAll(async () => {
  grpcServer?.server.forceShutdown();
  await httpServer?.close(0);
});

interface Answer {
  /** grpc-status, or undefined when the call was still open after holdMs (then cancelled by the client). */
  status: number | undefined;
  bytes: number;
  ms: number;
}

/** One gRPC call over raw HTTP/2, so that any grpc-timeout value reaches the server as written. */
function call(port: number, method: string, body: Buffer, headers: Record<string, string>, holdMs: number): Promise<Answer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const t0 = Date.now();
  return new Promise((resolve) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': `/inventory.v1.InventoryService/${method}`,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    let status: number | undefined;
    let bytes = 0;
    const hold = setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), holdMs);
    stream.on('response', (h) => {
      if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
    });
    stream.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    stream.on('trailers', (t) => {
      status = Number(t['grpc-status']);
    });
    stream.on('error', () => {});
    stream.on('close', () => {
      clearTimeout(hold);
      session.close();
      resolve({ status, bytes, ms: Date.now() - t0 });
    });
    stream.end(body);
  });
}

const deduct = message(DeductRequestSchema, create(DeductRequestSchema, { couponId: 'c', requestId: 'r', quantity: 1n }));
const watch = message(WatchStockRequestSchema, create(WatchStockRequestSchema, { couponId: 'c' }));
const ports = () => [
  { port: 'grpc', n: grpcServer.port },
  { port: 'http', n: httpServer.port },
];

describe('deadlines of 24.8 days and more', () => {
  it('when a client sends grpc-timeout 720H (30 days), 2147484S or 99999999H, then Deduct answers OK on both ports', async () => {
    const answers = [];
    for (const { port, n } of ports()) {
      for (const t of ['720H', '2147484S', '99999999H', '35791394M']) {
        const a = await call(n, 'Deduct', deduct, { 'grpc-timeout': t }, 5000);
        answers.push({ port, t, status: a.status });
      }
    }
    expect(answers.filter((a) => a.status !== 0)).toEqual([]);
  });

  it('when a WatchStock is opened with a 30-day deadline, then it stays open on both ports', async () => {
    for (const { port, n } of ports()) {
      const a = await call(n, 'WatchStock', watch, { 'grpc-timeout': '720H' }, 600);
      expect({ port, status: a.status, sent: a.bytes > 0 }).toEqual({ port, status: undefined, sent: true });
      expect(a.ms).toBeGreaterThanOrEqual(550);
    }
  });

  it('when a Connect client sends connect-timeout-ms above 2^31 - 1, then the call is served', async () => {
    const res = await fetch(`http://127.0.0.1:${httpServer.port}/inventory.v1.InventoryService/Deduct`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'connect-protocol-version': '1', 'connect-timeout-ms': '3000000000' },
      body: JSON.stringify({ couponId: 'c', requestId: 'r', quantity: '1' }),
    });
    expect([res.status, ((await res.json()) as { outcome: string }).outcome]).toEqual([200, 'DEDUCT_OUTCOME_DEDUCTED']);
  });
});

describe('a stream whose deadline passes', () => {
  it('when a WatchStock deadline of 300 ms passes, then the stream ends DEADLINE_EXCEEDED on both ports', async () => {
    for (const { port, n } of ports()) {
      const a = await call(n, 'WatchStock', watch, { 'grpc-timeout': '300m' }, 5000);
      expect({ port, status: a.status }).toEqual({ port, status: 4 });
      expect(a.ms).toBeGreaterThanOrEqual(250);
      expect(a.ms).toBeLessThan(4000);
    }
  });
});
