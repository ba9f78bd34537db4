// A private Redis Cluster (3 masters + 3 replicas) on its own ports and data dir, so fault tests can SIGKILL,
// SIGSTOP and restart nodes without touching the shared stack on 7001-7006. Nodes are daemonized
// redis-servers; every signal goes to the pid in that node's own pidfile.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRedisCluster, portOpen, readPid, startRedisNode, waitFor } from '../../deploy/local/stack.js';
import { startTestApp, type TestApp } from '../../test/support/harness.js';

const run = promisify(execFile);

/** redis-cli without blocking the event loop: the service under test runs in this process too. */
export async function cli(port: number, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 3000 });
    return stdout.trim();
  } catch {
    return '';
  }
}

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

export interface NodeInfo {
  id: string;
  port: number;
  role: 'master' | 'replica';
  /** The master's node id, for a replica. */
  masterId: string | undefined;
  failed: boolean;
  /** Slot ranges, for a master. */
  slots: [number, number][];
}

export class OwnCluster {
  private constructor(readonly ports: number[]) {}

  static async start(basePort = 7101): Promise<OwnCluster> {
    const ports = Array.from({ length: 6 }, (_, i) => basePort + i);
    const c = new OwnCluster(ports);
    await createRedisCluster(ports, (p) => c.dir(p));
    return c;
  }

  dir(port: number): string {
    return join(ROOT, '.data', 'faults', 'redis', String(port));
  }

  /** SHARDSTOCK_REDIS_NODES for a service instance: every node is a seed, so any survivor can answer. */
  get seeds(): string {
    return this.ports.map((p) => `127.0.0.1:${p}`).join(',');
  }

  pid(port: number): number {
    const pid = readPid(join(this.dir(port), 'redis.pid'));
    if (!pid) throw new Error(`redis node ${port} is not running`);
    return pid;
  }

  /** The topology as one live node sees it. */
  async nodes(askPort?: number): Promise<NodeInfo[]> {
    let port = askPort;
    for (const p of this.ports) {
      if (port !== undefined) break;
      if ((await cli(p, 'ping')) === 'PONG') port = p;
    }
    if (port === undefined) throw new Error('no node of the own cluster answers');
    return (await cli(port, 'cluster', 'nodes'))
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const f = line.split(' ');
        const flags = f[2]!.split(',');
        return {
          id: f[0]!,
          port: Number(f[1]!.split(':')[1]!.split('@')[0]),
          role: flags.includes('master') ? ('master' as const) : ('replica' as const),
          masterId: f[3] === '-' ? undefined : f[3],
          failed: flags.includes('fail') || flags.includes('fail?'),
          slots: f
            .slice(8)
            .filter((s) => /^\d/.test(s))
            .map((s) => {
              const [a, b] = s.split('-').map(Number);
              return [a!, b ?? a!] as [number, number];
            }),
        };
      });
  }

  async masterOfSlot(slot: number, askPort?: number): Promise<NodeInfo> {
    const m = (await this.nodes(askPort)).find((n) => n.role === 'master' && !n.failed && n.slots.some(([a, b]) => slot >= a && slot <= b));
    if (!m) throw new Error(`no live master owns slot ${slot}`);
    return m;
  }

  async replicasOf(master: NodeInfo, askPort?: number): Promise<NodeInfo[]> {
    return (await this.nodes(askPort)).filter((n) => n.role === 'replica' && n.masterId === master.id && !n.failed);
  }

  signal(port: number, sig: NodeJS.Signals): void {
    process.kill(this.pid(port), sig);
  }

  /** SIGKILL, then wait until the port is closed. */
  async kill(port: number): Promise<void> {
    this.signal(port, 'SIGKILL');
    await waitFor(`redis ${port} to die`, async () => !(await portOpen(port)), 10_000);
  }

  /** Waits until a live node other than `deadPort` owns `slot` and the cluster says ok; returns the new master. */
  async waitPromotion(slot: number, deadPort: number, timeoutMs = 20_000): Promise<NodeInfo> {
    let promoted: NodeInfo | undefined;
    const ask = this.ports.find((p) => p !== deadPort)!;
    await waitFor(
      `a replica to take over slot ${slot} from ${deadPort}`,
      async () => {
        try {
          const m = await this.masterOfSlot(slot, ask);
          if (m.port === deadPort) return false;
          if (!(await cli(m.port, 'cluster', 'info')).includes('cluster_state:ok')) return false;
          promoted = m;
          return true;
        } catch {
          return false;
        }
      },
      timeoutMs,
    );
    return promoted!;
  }

  /** Starts a killed node again from its nodes.conf and AOF: it rejoins as a replica of whoever took its slots
   * (or, back before the failover, as the master it was, with what its AOF kept). */
  async restart(port: number): Promise<void> {
    startRedisNode(port, this.dir(port));
    await waitFor(`redis ${port} to answer`, () => portOpen(port), 10_000);
  }

  /** Starts a killed node again with its data files gone (nodes.conf kept): a disk that lost the data, or a
   * node that ran without persistence. */
  async restartEmpty(port: number): Promise<void> {
    for (const f of ['appendonlydir', 'dump.rdb']) rmSync(join(this.dir(port), f), { recursive: true, force: true });
    await this.restart(port);
  }

  /** Waits for 3 masters + 3 replicas, every replica's link up. */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    await waitFor(
      'own cluster healthy',
      async () => {
        const live = (await this.nodes()).filter((n) => !n.failed);
        if (live.filter((n) => n.role === 'master').length !== 3 || live.filter((n) => n.role === 'replica').length !== 3) return false;
        for (const p of this.ports) {
          const info = await cli(p, 'info', 'replication');
          if (!(await cli(p, 'cluster', 'info')).includes('cluster_state:ok')) return false;
          if (!info.includes('role:master') && !info.includes('master_link_status:up')) return false;
        }
        // cluster_state:ok on each node is not enough after a reshuffle: until every node names the same master
        // for every slot, a client can be bounced between them (MOVED ping-pong) and give up.
        const views = await Promise.all(this.ports.map(async (p) => slotOwners(await cli(p, 'cluster', 'nodes'))));
        return new Set(views).size === 1;
      },
      timeoutMs,
    );
  }

  stop(): void {
    for (const port of this.ports) {
      const pid = readPid(join(this.dir(port), 'redis.pid'));
      if (pid) {
        try {
          process.kill(pid, 'SIGCONT');
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      rmSync(this.dir(port), { recursive: true, force: true });
    }
  }
}

/** The masters with their slot ranges as one node's CLUSTER NODES sees them, in a comparable form. */
function slotOwners(clusterNodes: string): string {
  return clusterNodes
    .split('\n')
    .map((l) => l.trim().split(' '))
    .filter((f) => f.length > 8 && f[2]!.includes('master') && !f[2]!.includes('fail'))
    .map((f) => `${f[1]!.split('@')[0]} ${f.slice(8).join(',')}`)
    .sort()
    .join(';');
}

/** Two service instances of one namespace on `cluster`, each relaying, settling and sweeping moves: the pair
 * the data-loss and reshard tests sell through. */
export async function startInstancePair(cluster: OwnCluster): Promise<[TestApp, TestApp]> {
  const env = { SHARDSTOCK_REDIS_NODES: cluster.seeds, SHARDSTOCK_WORKERS: 'relay,settle,sweep', SHARDSTOCK_SWEEP_INTERVAL_MS: '250' };
  const a = await startTestApp(env);
  const b = await startTestApp({ ...env, SHARDSTOCK_NAMESPACE: a.namespace });
  return [a, b];
}

/** For a test file: a private cluster on `port` and two instances on it (startInstancePair), started before its
 * first test and stopped after its last; `got` receives them once started. */
export function useInstancePair(port: number, got: (cluster: OwnCluster, a: TestApp, b: TestApp) => void): void {
  let cluster: OwnCluster | undefined;
  let a: TestApp | undefined;
  let b: TestApp | undefined;
  beforeAll(async () => {
    cluster = await OwnCluster.start(port);
    [a, b] = await startInstancePair(cluster);
    got(cluster, a, b);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    cluster?.stop();
  });
}
