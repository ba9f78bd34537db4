// Deadlines grpc-js does not keep for the connections we hand it (grpc-server.ts): the first call's headers
// must arrive within headersTimeoutMs of the connection (a HEADERS frame whose CONTINUATION never comes
// otherwise holds the socket: grpc-js's idle close is a graceful GOAWAY that waits for it), and a connection
// with no call for idleTimeoutMs + headersTimeoutMs is cut even if its graceful close hangs. Calls are tied
// to their socket by the peer address and port grpc-js reports.
import type { Socket } from 'node:net';

interface Conn {
  socket: Socket;
  active: number;
  calls: number;
  idleSince: number;
}

export class GrpcConnectionWatch {
  private readonly conns = new Map<string, Conn>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly headersTimeoutMs: number,
    private readonly idleTimeoutMs: number,
    private readonly onRefused: (reason: string) => void,
  ) {
    this.timer = setInterval(() => this.sweep(), Math.max(50, Math.min(500, headersTimeoutMs / 4))).unref();
  }

  add(socket: Socket): void {
    const key = keyOf(socket.remoteAddress, socket.remotePort);
    this.conns.set(key, { socket, active: 0, calls: 0, idleSince: performance.now() });
    socket.once('close', () => {
      if (this.conns.get(key)?.socket === socket) this.conns.delete(key);
    });
  }

  /** A call's headers arrived; the returned function marks its end. */
  callStarted(remoteAddress: string | undefined, remotePort: number | undefined): () => void {
    const conn = this.conns.get(keyOf(remoteAddress, remotePort));
    if (!conn) return () => {};
    conn.active++;
    conn.calls++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      conn.active--;
      if (conn.active === 0) conn.idleSince = performance.now();
    };
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private sweep(): void {
    const now = performance.now();
    for (const conn of this.conns.values()) {
      if (conn.active > 0) continue;
      const idle = now - conn.idleSince;
      if (conn.calls === 0 && idle > this.headersTimeoutMs) {
        this.onRefused('headers_timeout');
        conn.socket.destroy();
      } else if (idle > this.idleTimeoutMs + this.headersTimeoutMs) {
        conn.socket.destroy();
      }
    }
  }
}

const keyOf = (address: string | undefined, port: number | undefined) => `${address ?? ''}|${port ?? 0}`;
