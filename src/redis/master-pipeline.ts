// Calls sent on one master's own connection, in one write, for the group commit's one call per master and
// round (shard-batcher.ts): the cluster client's routing, auto-pipelining and NOSCRIPT fallback are not in
// the way, so the caller handles redirects and NOSCRIPT itself. At the `replica` ack level a WAIT follows the
// calls in the same write (ReplicaAck.pipelineWithWait); on the same connection, it counts exactly the writes
// before it.
import type { Cluster, Redis } from 'ioredis';
import { slotOf } from './key-slot.js';

export type Command = readonly (string | number | Buffer)[];

/** The master (host:port) the client routes `key` to now; undefined while no master is known for its slot. */
export function masterOf(cluster: Cluster, key: string): string | undefined {
  return masterOfSlot(cluster, slotOf(key));
}

/** masterOf for a slot already computed. */
export function masterOfSlot(cluster: Cluster, slot: number): string | undefined {
  return cluster.slots[slot]?.[0];
}

/** The master's connection in the client's pool, by host:port; undefined when it has none. */
export function masterConnection(cluster: Cluster, nodeKey: string): Redis | undefined {
  return cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey);
}

/**
 * Sends `commands` (then `after`, when given) on master `nodeKey`'s connection in one write. Undefined when
 * that master has no ready connection (the caller takes the cluster client's path, or waits; a connection not
 * yet opened is opened for the next call); otherwise one [error, reply] per command, `after` last.
 */
export async function sendOnMaster(
  cluster: Cluster,
  nodeKey: string,
  commands: readonly Command[],
  after?: Command,
): Promise<[Error | null, unknown][] | undefined> {
  const node = masterConnection(cluster, nodeKey);
  if (node?.status !== 'ready') {
    // The cluster client connects a node's connection on its first command (lazily): a master that only ever
    // got calls sent here would stay unconnected, and its callers on the slow path, for good.
    if (node?.status === 'wait') node.connect().catch(() => {});
    return undefined;
  }
  const p = node.pipeline();
  const all = after ? [...commands, after] : commands;
  for (const [name, ...args] of all) p.call(name as string, ...args);
  const out = (await p.exec()) as [Error | null, unknown][] | null;
  if (!out || out.length !== all.length)
    throw new Error(`pipeline on ${nodeKey} answered ${out?.length ?? 0} replies for ${all.length} commands`);
  return out;
}

/** Loads `lua` into master `nodeKey`'s script cache, in the background (a failure shows as the next call's
 * NOSCRIPT, which takes the cluster client's path again). */
export function loadOnMaster(cluster: Cluster, nodeKey: string, lua: string): void {
  masterConnection(cluster, nodeKey)
    ?.script('LOAD', lua)
    .catch(() => {});
}
