// The two ways the load generator can put a pre-encoded Deduct on the wire, both over a few long-lived
// HTTP/2 connections, requests spread round-robin:
//   http2    raw node:http2 with gRPC framing (5-byte prefix, grpc-status in trailers) — the cheapest;
//   grpc-js  grpc.Client.makeUnaryRequest with identity (de)serializers — what a typical Node client pays.
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';

export const DEDUCT_PATH = '/inventory.v1.InventoryService/Deduct';

/** status: a gRPC status code, or -1 for a transport failure; body: the response message (no frame). */
export type OnReply = (status: number, body: Buffer | undefined, detail?: string) => void;

export interface LoadTransport {
  /** `frame` is a complete length-prefixed gRPC message. */
  send(frame: Buffer, onReply: OnReply): void;
  close(): void;
}

/** grpc-message is percent-encoded on the wire. */
function grpcMessage(raw: string | string[] | undefined): string {
  const s = String(raw);
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function rawHttp2Transport(addr: string, connections: number, timeoutMs: number): LoadTransport {
  const sessions = Array.from({ length: connections }, () => {
    const s = http2.connect(`http://${addr}`, { settings: { enablePush: false, initialWindowSize: 1 << 20 } });
    s.on('error', () => {}); // surfaced per stream
    return s;
  });
  const headers = {
    ':method': 'POST',
    ':path': DEDUCT_PATH,
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': `${timeoutMs}m`,
  };
  let next = 0;
  return {
    send(frame, onReply) {
      const session = sessions[next++ % sessions.length]!;
      let status = -1;
      let body: Buffer | undefined;
      let detail: string | undefined;
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request(headers);
      } catch (err) {
        // A closed session throws at once: answer on the next turn, never recursively.
        setImmediate(() => onReply(-1, undefined, (err as Error).message));
        return;
      }
      stream.on('response', (h) => {
        // A trailers-only answer (an error) carries grpc-status in the headers.
        if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
        if (h['grpc-message'] !== undefined) detail = grpcMessage(h['grpc-message']);
      });
      stream.on('data', (chunk: Buffer) => {
        body = body ? Buffer.concat([body, chunk]) : chunk;
      });
      stream.on('trailers', (t) => {
        status = Number(t['grpc-status'] ?? 2);
        if (t['grpc-message'] !== undefined) detail = grpcMessage(t['grpc-message']);
      });
      stream.on('error', (err) => {
        detail = err.message;
      });
      stream.on('close', () => onReply(status, body && body.length >= 5 ? body.subarray(5) : undefined, detail));
      stream.end(frame);
    },
    close() {
      for (const s of sessions) s.close();
    },
  };
}

export function grpcJsTransport(addr: string, connections: number, timeoutMs: number): LoadTransport {
  // A local subchannel pool per client, so each client really opens its own connection.
  const clients = Array.from(
    { length: connections },
    () => new grpc.Client(addr, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }),
  );
  const identity = (b: Buffer) => b;
  let next = 0;
  return {
    send(frame, onReply) {
      const client = clients[next++ % clients.length]!;
      client.makeUnaryRequest(DEDUCT_PATH, identity, identity, frame.subarray(5), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? onReply(err.code ?? -1, undefined, err.details) : onReply(0, res),
      );
    },
    close() {
      for (const c of clients) c.close();
    },
  };
}
