// Deadlines for connections handed to node:http / node:http2 by hand (http-server.ts): Node tracks
// headersTimeout and requestTimeout only for servers that listen() themselves, so a half-sent header would
// otherwise hold its socket forever. Per socket:
//   headers  the request headers (HTTP/1.1) or the first stream's headers (HTTP/2) must be complete
//            within headersTimeoutMs of the connection, and an idle HTTP/1.1 keep-alive connection must
//            bring its next complete header within idleTimeoutMs + headersTimeoutMs (a byte trickle does
//            not reset it, unlike a socket idle timeout);
//   request  a request must have arrived in full (headers and body) within requestTimeoutMs; the response
//            may take longer (server streams);
//   idle     an HTTP/2 session with no open stream for idleTimeoutMs is closed with GOAWAY;
//   ping     an HTTP/2 session with a stream open is pinged every keepaliveMs and cut when no answer comes
//            within keepaliveTimeoutMs: a peer gone without a FIN, or one that stopped reading its socket,
//            would otherwise hold its WatchStock streams and the messages queued on them until their lifetime.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { constants as h2c, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';

export interface NetworkLimits {
  maxConnections: number;
  firstByteTimeoutMs: number;
  headersTimeoutMs: number;
  idleTimeoutMs: number;
  requestTimeoutMs: number;
  maxStreamsPerConnection: number;
  maxHeaderBytes: number;
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
}

interface SocketState {
  headers: NodeJS.Timeout | undefined;
  busy: number;
}

export class ConnectionTimers {
  private readonly states = new Map<Socket, SocketState>();

  constructor(
    private readonly limits: NetworkLimits,
    private readonly onRefused: (reason: string) => void,
  ) {}

  /** A newly accepted socket: its headers deadline starts now. */
  socket(socket: Socket): void {
    const state: SocketState = { headers: undefined, busy: 0 };
    this.states.set(socket, state);
    this.armHeaders(socket, state, this.limits.headersTimeoutMs);
    socket.once('close', () => {
      if (state.headers) clearTimeout(state.headers);
      this.states.delete(socket);
    });
  }

  /** HTTP/1.1: headers complete; the body must follow within the request timeout. */
  h1Request(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket;
    const state = this.states.get(socket);
    if (!state) return;
    if (state.headers) clearTimeout(state.headers);
    state.headers = undefined;
    state.busy++;
    const timer = setTimeout(() => {
      if (req.complete) return;
      this.onRefused('request_timeout');
      socket.destroy();
    }, this.limits.requestTimeoutMs).unref();
    res.once('close', () => {
      clearTimeout(timer);
      state.busy--;
      if (state.busy === 0 && !socket.destroyed) this.armHeaders(socket, state, this.limits.idleTimeoutMs + this.limits.headersTimeoutMs);
    });
  }

  /** HTTP/2: the first stream's headers end the handshake; a session without streams for the idle timeout is closed. */
  h2Session(session: Http2Session, socket: Socket | undefined): void {
    const state = socket ? this.states.get(socket) : undefined;
    let open = 0;
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      idle = setTimeout(() => {
        if (open > 0 || session.closed) return;
        session.close();
        // A graceful close waits for a header block the peer never finishes: cut it after the headers timeout.
        setTimeout(() => session.destroyed || session.destroy(), this.limits.headersTimeoutMs).unref();
      }, this.limits.idleTimeoutMs).unref();
    };
    armIdle();
    let unanswered: NodeJS.Timeout | undefined;
    const pinger = setInterval(() => {
      if (open === 0 || unanswered || session.closed || session.destroyed) return;
      unanswered = setTimeout(() => {
        this.onRefused('keepalive_timeout');
        session.destroy();
      }, this.limits.keepaliveTimeoutMs).unref();
      const answered = () => {
        clearTimeout(unanswered);
        unanswered = undefined;
      };
      // The callback also comes (with an error) when the session ends first.
      if (!session.ping(answered)) answered();
    }, this.limits.keepaliveMs).unref();
    session.on('stream', (stream: ServerHttp2Stream) => {
      if (state?.headers) clearTimeout(state.headers);
      if (state) state.headers = undefined;
      open++;
      if (idle) clearTimeout(idle);
      idle = undefined;
      if (state) state.busy++;
      stream.once('close', () => {
        open--;
        if (state) state.busy--;
        if (open === 0 && !session.closed && !session.destroyed) armIdle();
      });
    });
    session.once('close', () => {
      if (idle) clearTimeout(idle);
      clearInterval(pinger);
      clearTimeout(unanswered);
    });
  }

  /** HTTP/2: a stream whose request (headers + body) is not complete within the request timeout is cancelled. */
  h2Stream(stream: ServerHttp2Stream): void {
    const timer = setTimeout(() => {
      if (stream.destroyed || stream.state?.remoteClose) return;
      this.onRefused('request_timeout');
      stream.close(h2c.NGHTTP2_CANCEL);
    }, this.limits.requestTimeoutMs).unref();
    stream.once('close', () => clearTimeout(timer));
  }

  /** Shutdown: connections with no request in progress are closed now. */
  closeIdle(): void {
    for (const [socket, state] of this.states) if (state.busy === 0) socket.destroy();
  }

  private armHeaders(socket: Socket, state: SocketState, ms: number): void {
    if (state.headers) clearTimeout(state.headers);
    state.headers = setTimeout(() => {
      state.headers = undefined;
      if (socket.destroyed) return;
      this.onRefused('headers_timeout');
      socket.destroy();
    }, ms).unref();
  }
}
