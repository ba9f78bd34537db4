// The HTTP port: connect-node (Connect, gRPC-Web, JSON) plus plain routes (/healthz, /readyz, /metrics,
// the live page), over HTTP/1.1 and cleartext HTTP/2 on one port. node:http2 without TLS refuses HTTP/1.1
// (curl without --http2-prior-knowledge, browsers), so each connection's first bytes pick the server.
import { createServer as createHttp1, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttp2, type Http2Session } from 'node:http2';
import { createServer as createNet, type Server as NetServer, type Socket } from 'node:net';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { createContextKey, createContextValues, type ConnectRouter } from '@connectrpc/connect';

/** The caller's address (without port), for handlers that limit per caller. */
export const peerKey = createContextKey<string>('', { description: 'peer address' });

/** HTTP/2 requests arrive through the same compatibility API (writeHead, end, headers). */
export type PlainRoute = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;

export interface HttpServerOptions {
  routes: (router: ConnectRouter) => void;
  /** Tried in order for requests that are not RPCs; return true when handled. */
  plain: PlainRoute[];
  maxMessageBytes: number;
}

export interface HttpServer {
  port: number;
  close(graceMs: number): Promise<void>;
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export async function startHttpServer(addr: string, options: HttpServerOptions): Promise<HttpServer> {
  const fallback = async (req: IncomingMessage, res: ServerResponse) => {
    try {
      for (const route of options.plain) if (await route(req, res)) return;
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found\n');
    } catch {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  };
  const handler = connectNodeAdapter({
    routes: options.routes,
    readMaxBytes: options.maxMessageBytes,
    fallback: fallback as never,
    contextValues: (req) => createContextValues().set(peerKey, req.socket?.remoteAddress ?? ''),
  });
  const h1 = createHttp1({ keepAliveTimeout: 5000 }, handler);
  const h2 = createHttp2({}, handler);
  const sockets = new Set<Socket>();
  const sessions = new Set<Http2Session>();
  h2.on('session', (s) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
  });

  const net: NetServer = createNet((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.once('readable', function route() {
      const head: Buffer | null = socket.read(PREFACE.length) ?? socket.read();
      if (head === null) {
        socket.once('readable', route);
        return;
      }
      socket.unshift(head);
      const isH2 =
        head.length >= 3 &&
        head.subarray(0, Math.min(head.length, PREFACE.length)).equals(PREFACE.subarray(0, Math.min(head.length, PREFACE.length)));
      (isH2 ? h2 : h1).emit('connection', socket);
    });
  });

  const [host, portStr] = [addr.slice(0, addr.lastIndexOf(':')), addr.slice(addr.lastIndexOf(':') + 1)];
  await new Promise<void>((resolve, reject) => {
    net.once('error', reject);
    net.listen(Number(portStr), host.replace(/^\[|\]$/g, ''), () => resolve());
  });
  const address = net.address();
  const port = typeof address === 'object' && address ? address.port : Number(portStr);

  return {
    port,
    async close(graceMs) {
      const closed = new Promise<void>((r) => net.close(() => r()));
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
      const deadline = setTimeout(() => {
        for (const s of sessions) s.destroy();
        for (const s of sockets) s.destroy();
      }, graceMs);
      // HTTP/1.1 connections finish their current request, then close.
      h1.close();
      await closed;
      clearTimeout(deadline);
    },
  };
}
