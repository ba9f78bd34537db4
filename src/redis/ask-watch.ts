// The cluster client follows an ASK redirect by itself, silently: while a slot is being migrated, a command
// whose keys have already left for the importing node is sent there again (ASKING first), and the slot map
// still names the old master. A `replica` WAIT for that write must go to the node that ran it (WAIT counts the
// writes of its own connection), not to the slot map's master, so the ASKs the client follows are noted here,
// per slot. ioredis has no event for it; every redirect of a command or a pipeline goes through its Cluster's
// handleError, which is wrapped once per client.
import type { Cluster } from 'ioredis';
import { redirectOf } from './redirects.js';

/** How long an ASK keeps its node named for the slot: a reshard moves a slot's keys in seconds, and a WAIT
 * sent to a node that ran none of the write returns at once, so a generous window costs nothing. */
const REMEMBER_MS = 60_000;
/** The answer for a slot no ASK named (almost every call): one array, not a new one per write. */
const NONE: readonly string[] = [];

export class AskWatch {
  private static readonly watches = new WeakMap<Cluster, AskWatch>();
  /** slot -> node (host:port) -> when the client was last asked there. */
  private readonly asked = new Map<number, Map<string, number>>();

  /** The one watch of `cluster`, installed on first use. */
  static of(cluster: Cluster): AskWatch {
    let w = AskWatch.watches.get(cluster);
    if (!w) {
      w = new AskWatch(cluster);
      AskWatch.watches.set(cluster, w);
    }
    return w;
  }

  private constructor(cluster: Cluster) {
    const handleError = cluster.handleError.bind(cluster);
    cluster.handleError = (error, ttl, handlers) => {
      const r = redirectOf(error);
      if (r?.kind === 'ask') this.note(r.slot, r.node);
      handleError(error, ttl, handlers);
    };
  }

  /** Nodes the client was sent to by an ASK for `slot` in the last minute (usually none). */
  nodesAsked(slot: number, now = Date.now()): readonly string[] {
    const nodes = this.asked.get(slot);
    if (!nodes) return NONE;
    const out: string[] = [];
    for (const [node, at] of nodes) {
      if (now - at <= REMEMBER_MS) out.push(node);
      else nodes.delete(node);
    }
    if (nodes.size === 0) this.asked.delete(slot);
    return out;
  }

  private note(slot: number, node: string): void {
    let nodes = this.asked.get(slot);
    if (!nodes) {
      nodes = new Map();
      this.asked.set(slot, nodes);
    }
    nodes.set(node, Date.now());
  }
}
