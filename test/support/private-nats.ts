// A nats-server of a test's own, for the tests that take JetStream down or lose its store; the shared NATS stays
// untouched.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { waitFor } from './settlement.js';

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** A nats-server of the test's own (own port, own store directory): one it may kill, restart or empty without
 * touching the shared NATS. */
export class PrivateNats {
  private child!: ChildProcess;

  private constructor(
    private readonly port: number,
    private readonly dir: string,
  ) {}

  /** Starts one on a free port and a fresh store directory; `close()` stops it and removes the directory. */
  static async launch(): Promise<PrivateNats> {
    const nats = new PrivateNats(await freePort(), mkdtempSync(join(tmpdir(), 'shardstock-nats-')));
    await nats.start();
    return nats;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** (Re)starts the server on its own port and store directory, and waits until it listens. */
  async start(): Promise<void> {
    this.child = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.dir], { stdio: 'ignore' });
    await waitFor(
      'nats-server to listen',
      () => accepts(this.port),
      (ok) => ok,
      20_000,
      100,
    );
  }

  async kill(): Promise<void> {
    const child = this.child;
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
  }

  /** Kills the server and brings it back on an empty store directory. */
  async restartEmpty(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
    await this.start();
  }

  close(): void {
    this.child.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
