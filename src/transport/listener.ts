// The TCP front of both ports: one net.Server per port that we listen() ourselves, so every accepted socket
// gets an 'error' listener before anything else can happen to it (an RST before the first byte is then one
// closed socket, never an unhandled 'error' that ends the process), the connection count is capped
// (`maxConnections`: the kernel accept is answered by an immediate close), and a socket that sends nothing
// within the first-byte timeout is closed. What each port does with a socket next is its own business.
import { createServer as createNet, type Server as NetServer, type Socket } from 'node:net';

export interface ListenerLimits {
  /** Open connections at most; one more is closed at once. */
  maxConnections: number;
  /** A connection that has sent no byte after this long is closed. */
  firstByteTimeoutMs: number;
}

/** What happened to connections, read by /metrics. */
export interface ListenerStats {
  open: number;
  accepted: number;
  /** Closed at accept: the port was at its connection cap. */
  refusedCap: number;
  /** Closed for sending nothing within the first-byte timeout. */
  firstByteTimeouts: number;
  /** Socket errors (resets, broken pipes): each ends one connection and nothing else. */
  socketErrors: number;
}

export interface Listener {
  port: number;
  stats: ListenerStats;
  /** Stops accepting; open sockets are the caller's to end (destroyAll). */
  close(): Promise<void>;
  destroyAll(): void;
  /** Ends the connections that have not sent a byte yet (shutdown: nothing of theirs is in flight). */
  destroySilent(): void;
}

export function splitAddr(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(addr.slice(i + 1)) };
}

export async function listen(
  addr: string,
  limits: ListenerLimits,
  onSocket: (socket: Socket) => void,
  onServerError: (err: Error) => void,
  onRefused: (reason: 'connection_cap' | 'first_byte_timeout') => void = () => {},
): Promise<Listener> {
  const stats: ListenerStats = { open: 0, accepted: 0, refusedCap: 0, firstByteTimeouts: 0, socketErrors: 0 };
  const sockets = new Set<Socket>();
  const server: NetServer = createNet({ pauseOnConnect: false }, (socket) => {
    // First, before any await or hand-over: an error on this socket ends this socket only.
    socket.on('error', () => stats.socketErrors++);
    stats.accepted++;
    stats.open++;
    sockets.add(socket);
    socket.once('close', () => {
      stats.open--;
      sockets.delete(socket);
    });
    // bytesRead counts at the handle, so it also sees bytes a protocol layer consumed without JS reads.
    const firstByte = setTimeout(() => {
      if (socket.bytesRead === 0) {
        stats.firstByteTimeouts++;
        onRefused('first_byte_timeout');
        socket.destroy();
      }
    }, limits.firstByteTimeoutMs);
    firstByte.unref();
    socket.once('close', () => clearTimeout(firstByte));
    onSocket(socket);
  });
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => {
    stats.refusedCap++;
    onRefused('connection_cap');
  });

  const { host, port } = splitAddr(addr);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  // After listening, errors (EMFILE on accept, ...) are logged; they never end the process.
  server.on('error', onServerError);
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    stats,
    close: () => new Promise<void>((r) => server.close(() => r())),
    destroyAll() {
      for (const s of sockets) s.destroy();
    },
    destroySilent() {
      for (const s of sockets) if (s.bytesRead === 0) s.destroy();
    },
  };
}
