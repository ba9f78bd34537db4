// A TCP proxy a test can cut and restore, to make a shared server (MariaDB) unreachable for one app instance
// without touching the server itself.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private down = false;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<number> {
    this.server = createServer((client) => {
      if (this.down) {
        client.destroy();
        return;
      }
      const upstream = connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this.port;
  }

  /** Drops every open connection and refuses new ones until restore(). */
  cut(): void {
    this.down = true;
    for (const s of this.sockets) s.destroy();
  }

  /** Stops forwarding both ways without closing anything: to either end the other went silent, as a peer
   * gone without a FIN (or one that stopped reading) looks. */
  freeze(): void {
    for (const s of this.sockets) {
      s.unpipe();
      s.pause();
    }
  }

  restore(): void {
    this.down = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
