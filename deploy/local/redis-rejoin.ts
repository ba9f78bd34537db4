// Bringing back a node that has lost something: its data (it was started without persistence) or its whole
// directory. Either way it must not come back as an empty master that its replica would then copy.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { clusterNodes, liveNode, redisCli } from './redis-cli.js';
import { waitFor } from './wait.js';

const log = (msg: string) => process.stderr.write(`[stack] ${msg}\n`);

/** The node's own id when its nodes.conf says it was a master owning slots, and it keeps no data on disk (a node
 * started without persistence, as this stack did before it used AOF): started now, it would come back empty as
 * that master, and its replica would then copy the emptiness. */
export function emptyMasterId(dir: string): string | undefined {
  if (existsSync(join(dir, 'appendonlydir')) || existsSync(join(dir, 'dump.rdb')) || !existsSync(join(dir, 'nodes.conf'))) return undefined;
  const me = readFileSync(join(dir, 'nodes.conf'), 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => f[2]?.split(',').includes('myself'));
  return me?.[2]?.includes('master') && me.length > 8 ? me[0] : undefined;
}

/** Waits until a live node reports that `id` no longer owns slots (its replica took over); gives up after a
 * while, when no replica is left to take over. */
export async function waitForTakeover(ports: number[], port: number, id: string): Promise<void> {
  const ownsSlots = () => {
    const seed = liveNode(ports, port);
    return seed !== undefined && clusterNodes(seed).some((n) => n.id === id && n.ownsSlots);
  };
  log(`redis ${port}: kept no data and was a master; waiting for its replica to take over before starting it`);
  await waitFor(`a replica to take over from ${port}`, async () => !ownsSlots(), 20_000).catch(() =>
    log(`redis ${port}: no replica took over; starting it anyway (its slots come back empty)`),
  );
}

/** The ids the live nodes keep for `port`: read before a new node takes the address, which turns the old entry
 * into an address-less one. */
export function idsAt(ports: number[], port: number): string[] {
  const seed = liveNode(ports, port);
  if (seed === undefined) return [];
  return clusterNodes(seed)
    .filter((n) => n.address.startsWith(`127.0.0.1:${port}@`))
    .map((n) => n.id);
}

/** A node whose directory was lost comes back empty under a new id: the live nodes forget its old id, and it
 * joins as a replica of the master with the fewest. */
export function rejoinEmptyNode(ports: number[], port: number, oldIds: string[]): void {
  const seed = liveNode(ports, port);
  if (seed === undefined) throw new Error(`no node of the cluster answers to let ${port} rejoin`);
  for (const id of oldIds) {
    for (const p of ports) if (p !== port) redisCli(p, 'cluster', 'forget', id);
  }
  const add = spawnSync('redis-cli', ['--cluster', 'add-node', `127.0.0.1:${port}`, `127.0.0.1:${seed}`, '--cluster-slave'], {
    encoding: 'utf8',
  });
  if (add.status !== 0) throw new Error(`redis-cli --cluster add-node ${port} failed: ${add.stdout}${add.stderr}`);
}
