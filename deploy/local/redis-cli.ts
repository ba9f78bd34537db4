// redis-cli as the stack uses it: one command to one node, and the cluster's node table as one node sees it.
import { spawnSync } from 'node:child_process';

export function redisCli(port: number, ...args: string[]): string {
  const r = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 5000 });
  return (r.stdout ?? '').trim();
}

/** One line of CLUSTER NODES: id, address, flags, master id, …, then slot ranges from field 8 on. */
export interface NodeLine {
  id: string;
  /** `127.0.0.1:7001@17001`, or `:0@0` once the node's address was taken by another node. */
  address: string;
  flags: string[];
  /** A master that owns at least one slot. */
  ownsSlots: boolean;
}

export function clusterNodes(port: number): NodeLine[] {
  return redisCli(port, 'cluster', 'nodes')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' '))
    .map((f) => ({
      id: f[0]!,
      address: f[1] ?? '',
      flags: (f[2] ?? '').split(','),
      ownsSlots: (f[2] ?? '').includes('master') && f.length > 8,
    }));
}

/** A node of `ports` other than `except` that answers, if any. */
export function liveNode(ports: number[], except: number): number | undefined {
  return ports.find((p) => p !== except && redisCli(p, 'ping') === 'PONG');
}
