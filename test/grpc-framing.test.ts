// Calls whose framing or content type is wrong, over raw HTTP/2 so the bytes reach each port as written
// (src/transport/grpc-framing.ts). A unary call carries exactly one message: both ports answer one with two
// messages or none UNIMPLEMENTED, as connect-node and connect-go do, but grpc-js said "Received a second request
// message for server streaming method ..." of a unary method; both ports now say it in the same words. And
// grpc-js took `application/grpc+json` as protobuf, so a JSON body was decoded as protobuf bytes: the gRPC port
// now refuses it INVALID_ARGUMENT naming content-type and the HTTP port, which serves gRPC with JSON.
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
import type { InventoryHandlers } from '../src/transport/handlers.js';
import { startHttpServer, type HttpServer } from '../src/transport/http-server.js';
import { frame, message } from './support/grpc-frame.js';

let deducts = 0;
const handlers = {
  deduct: async () => {
    deducts++;
    return create(DeductResponseSchema, { outcome: DeductOutcome.DEDUCTED });
  },
  watchStock: async function* () {
    yield create(WatchStockResponseSchema, {});
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
  httpStatus: number | undefined;
  grpcStatus: number | undefined;
  grpcMessage: string;
}

function call(port: number, body: Buffer, contentType = 'application/grpc', method = 'Deduct'): Promise<Answer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  return new Promise((resolve) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': `/inventory.v1.InventoryService/${method}`,
      'content-type': contentType,
      te: 'trailers',
    });
    const a: Answer = { httpStatus: undefined, grpcStatus: undefined, grpcMessage: '' };
    const read = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) a.grpcStatus = Number(h['grpc-status']);
      if (h['grpc-message'] !== undefined) a.grpcMessage = decodeURIComponent(String(h['grpc-message']));
    };
    stream.on('response', (h) => {
      a.httpStatus = Number(h[':status']);
      read(h);
    });
    stream.on('trailers', read);
    stream.on('data', () => {});
    stream.on('error', () => {});
    stream.on('close', () => {
      session.close();
      resolve(a);
    });
    stream.end(body);
  });
}

const one = message(DeductRequestSchema, create(DeductRequestSchema, { couponId: 'c', requestId: 'r', quantity: 1n }));
const ports = () => [
  { port: 'grpc', n: grpcServer.port },
  { port: 'http', n: httpServer.port },
];
const INVALID_ARGUMENT = 3;
const UNIMPLEMENTED = 12;

describe('unary framing', () => {
  it('when a unary call carries two messages, then both ports answer UNIMPLEMENTED in the same words, and nothing runs', async () => {
    const before = deducts;
    for (const { port, n } of ports()) {
      const a = await call(n, Buffer.concat([one, one]));
      expect({ port, status: a.grpcStatus, message: a.grpcMessage }).toEqual({
        port,
        status: UNIMPLEMENTED,
        message: 'protocol error: received extra input message for unary method',
      });
    }
    expect(deducts).toBe(before);
  });

  it('when a unary call carries no message, then both ports answer UNIMPLEMENTED in the same words', async () => {
    for (const { port, n } of ports()) {
      const a = await call(n, Buffer.alloc(0));
      expect({ port, status: a.grpcStatus, message: a.grpcMessage }).toEqual({
        port,
        status: UNIMPLEMENTED,
        message: 'protocol error: missing input message for unary method',
      });
    }
  });

  it('when a WatchStock carries two messages, then both ports answer UNIMPLEMENTED naming a server-streaming method', async () => {
    const watch = message(WatchStockRequestSchema, create(WatchStockRequestSchema, { couponId: 'c' }));
    for (const { port, n } of ports()) {
      const a = await call(n, Buffer.concat([watch, watch]), 'application/grpc', 'WatchStock');
      expect({ port, status: a.grpcStatus, message: a.grpcMessage }).toEqual({
        port,
        status: UNIMPLEMENTED,
        message: 'protocol error: received extra input message for server-streaming method',
      });
    }
  });

  it('when a well-framed call follows, then it is answered OK on both ports', async () => {
    for (const { port, n } of ports()) {
      const a = await call(n, one);
      expect({ port, status: a.grpcStatus }).toEqual({ port, status: 0 });
    }
  });
});

describe('content subtype', () => {
  const json = frame(Buffer.from(JSON.stringify({ couponId: 'c', requestId: 'r', quantity: '1' })));

  it('when application/grpc+json reaches the gRPC port, then INVALID_ARGUMENT naming content-type and the HTTP port, and nothing runs', async () => {
    const before = deducts;
    const a = await call(grpcServer.port, json, 'application/grpc+json');
    expect(a.grpcStatus).toBe(INVALID_ARGUMENT);
    expect(a.grpcMessage).toMatch(/content-type/);
    expect(a.grpcMessage).toMatch(/HTTP port/);
    expect(deducts).toBe(before);
  });

  it('when application/grpc-web+proto reaches the gRPC port, then INVALID_ARGUMENT naming content-type, and nothing runs', async () => {
    const before = deducts;
    const a = await call(grpcServer.port, one, 'application/grpc-web+proto');
    expect(a.grpcStatus).toBe(INVALID_ARGUMENT);
    expect(a.grpcMessage).toMatch(/^content-type: application\/grpc-web\+proto is not served on the gRPC port/);
    expect(deducts).toBe(before);
  });

  it('when application/grpc+json reaches the HTTP port, then it is served', async () => {
    const a = await call(httpServer.port, json, 'application/grpc+json');
    expect(a.grpcStatus).toBe(0);
  });

  it('when application/grpc+proto or a charset parameter reaches the gRPC port, then it is served as protobuf', async () => {
    for (const ct of ['application/grpc+proto', 'application/grpc;charset=utf-8', 'application/grpc+proto; charset=utf-8']) {
      const a = await call(grpcServer.port, one, ct);
      expect({ ct, status: a.grpcStatus }).toEqual({ ct, status: 0 });
    }
  });
});
