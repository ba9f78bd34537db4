// The HTTP port: connect-node (Connect, gRPC-Web, JSON) plus plain routes (/healthz, /readyz, /metrics,
// the live page), over HTTP/1.1 and cleartext HTTP/2 on one port. node:http2 without TLS refuses HTTP/1.1
// (curl without --http2-prior-knowledge, browsers), so each connection's first bytes pick the server.
// Sockets reach the two protocol servers by hand (emit('connection')), and Node's own headersTimeout /
// requestTimeout only watch servers that listen() themselves: the deadlines are kept here (connection-timers.ts).
import { createServer as createHttp1, type IncomingMessage, type ServerResponse } from 'node:http';
import { constants as h2c, createServer as createHttp2, type Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { createContextKey, createContextValues, type ConnectRouter } from '@connectrpc/connect';
import { loadConfig, networkLimits } from '../config.js';
import { ConnectionTimers, type NetworkLimits } from './connection-timers.js';
import { clampDeadlineHeaders } from './deadline-header.js';
import { listen, type Listener, type ListenerStats } from './listener.js';

/** The caller's address (without port), for handlers that limit per caller. */
export const peerKey = createContextKey<string>('', { description: 'peer address' });

/** HTTP/2 requests arrive through the same compatibility API (writeHead, end, headers). */
export type PlainRoute = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;

export interface HttpServerOptions {
  routes: (router: ConnectRouter) => void;
  /** Tried in order for requests that are not RPCs; return true when handled. */
  plain: PlainRoute[];
  maxMessageBytes: number;
  /** Connection limits; default loadConfig's defaults. */
  limits?: NetworkLimits | undefined;
  /** A refusal at the connection level (cap, timeout, oversized header): counted by reason on /metrics. */
  onRefused?: ((reason: string) => void) | undefined;
  onServerError?: ((err: Error) => void) | undefined;
}

export interface HttpServer {
  port: number;
  connections: ListenerStats;
  close(graceMs: number): Promise<void>;
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export async function startHttpServer(addr: string, options: HttpServerOptions): Promise<HttpServer> {
  const limits = options.limits ?? networkLimits(loadConfig({}));
  const onRefused = options.onRefused ?? (() => {});
  const onServerError = options.onServerError ?? (() => {});
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
  const h1 = createHttp1({ keepAliveTimeout: limits.idleTimeoutMs, maxHeaderSize: limits.maxHeaderBytes }, (req, res) => {
    clampDeadlineHeaders(req.headers);
    return handler(req, res);
  });
  const h2 = createHttp2({
    settings: { maxConcurrentStreams: limits.maxStreamsPerConnection, maxHeaderListSize: limits.maxHeaderBytes },
    // A peer that keeps opening streams beyond the limit is cut off after this many refusals.
    maxSessionRejectedStreams: limits.maxStreamsPerConnection,
  });
  // SETTINGS_MAX_HEADER_LIST_SIZE is advisory to the peer; the bound is enforced here (RFC 9113 §6.5.2 sizes).
  h2.on('request', (req, res) => {
    let size = 0;
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) size += req.rawHeaders[i]!.length + req.rawHeaders[i + 1]!.length + 32;
    if (size <= limits.maxHeaderBytes) {
      clampDeadlineHeaders(req.headers);
      return handler(req, res);
    }
    onRefused('header_too_large');
    res.writeHead(431, { 'content-type': 'text/plain' });
    res.end('request header fields too large\n');
  });
  const timers = new ConnectionTimers(limits, onRefused);
  const sessions = new Set<Http2Session>();

  h1.on('request', (req: IncomingMessage, res: ServerResponse) => timers.h1Request(req, res));
  h1.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // A peer that reset its connection was refused nothing (and nothing can be written to it).
    if (err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    onRefused(tooLarge ? 'header_too_large' : 'bad_request');
    if (socket.writable && !socket.destroyed) {
      socket.end(
        tooLarge
          ? 'HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\r\n'
          : 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n',
      );
    }
    socket.destroy();
  });
  // session.socket is a proxy, not the socket we track: the session is created synchronously by
  // emit('connection'), so the socket being handed over is the one in `handing`.
  let handing: Socket | undefined;
  h2.on('session', (s) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
    timers.h2Session(s, handing);
  });
  h2.on('stream', (stream) => timers.h2Stream(stream));
  h2.on('sessionError', () => onRefused('protocol_error'));
  h2.on('error', onServerError);
  h1.on('error', onServerError);

  const route = (socket: Socket) => {
    timers.socket(socket);
    socket.once('readable', function sniff() {
      if (socket.destroyed) return;
      const head: Buffer | null = socket.read(PREFACE.length) ?? socket.read();
      if (head === null) {
        socket.once('readable', sniff);
        return;
      }
      socket.unshift(head);
      const n = Math.min(head.length, PREFACE.length);
      const isH2 = head.length >= 3 && head.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (!isH2) {
        h1.emit('connection', socket);
        return;
      }
      handing = socket;
      h2.emit('connection', socket);
      handing = undefined;
    });
  };
  const listener: Listener = await listen(
    addr,
    { maxConnections: limits.maxConnections, firstByteTimeoutMs: limits.firstByteTimeoutMs },
    route,
    onServerError,
    onRefused,
  );

  return {
    port: listener.port,
    connections: listener.stats,
    async close(graceMs) {
      const closed = listener.close();
      // h1.closeIdleConnections() only knows sockets of a server that listen()s itself.
      timers.closeIdle();
      for (const s of sessions) s.close();
      const deadline = setTimeout(() => {
        for (const s of sessions) s.destroy(undefined, h2c.NGHTTP2_CANCEL);
        listener.destroyAll();
      }, graceMs);
      // HTTP/1.1 connections finish their current request, then close.
      h1.close();
      await closed;
      clearTimeout(deadline);
    },
  };
}
