// `replica` durability: a Deduct/Compensate is answered only after its write reached at least one replica.
// WAIT counts the writes made on the connection it is sent on, so it goes to the owning master's node
// connection (the one ioredis sends the scripts on), after the write's reply. One WAIT covers every write
// that connection has replied to before it, so concurrent callers share one: measured 1,000 writes took
// 15 ms with one WAIT per master against 101 ms with one per write, measured on the development machine.
import type { Cluster, Redis } from 'ioredis';
import { AskWatch } from './ask-watch.js';
import { slotOf } from './key-slot.js';
import { type Command, masterConnection, masterOf, masterOfSlot, sendOnMaster } from './master-pipeline.js';

export class ReplicationTimeout extends Error {
  override name = 'ReplicationTimeout';
}

interface NodeQueue {
  busy: boolean;
  waiting: { resolve: () => void; reject: (e: Error) => void }[];
}

export class ReplicaAck {
  private readonly queues = new Map<string, NodeQueue>();
  private readonly asks: AskWatch;

  constructor(
    private readonly cluster: Cluster,
    private readonly timeoutMs: number,
    private readonly replicas = 1,
  ) {
    this.asks = AskWatch.of(cluster);
  }

  /** The master the client routes `key` to now; pass it to afterWrite when taken before the write. */
  owner(key: string): string | undefined {
    return masterOf(this.cluster, key);
  }

  /** Resolves once a WAIT sent after this call saw the write of `key` reach enough replicas. `ownerBefore`:
   * the slot's master when the write was sent; if it changed since (failover, MOVED), a WAIT on the new
   * master would say nothing about the write, so it is reported unacknowledged (the caller retries). */
  afterWrite(key: string, ownerBefore?: string): Promise<void> {
    const slot = slotOf(key);
    const nodeKey = masterOfSlot(this.cluster, slot);
    if (!nodeKey) return Promise.reject(new ReplicationTimeout('no master known for the slot'));
    if (ownerBefore !== undefined && ownerBefore !== nodeKey) {
      return Promise.reject(new ReplicationTimeout(`the slot moved from ${ownerBefore} to ${nodeKey} during the write`));
    }
    // The slot is being migrated and the client followed an ASK for it: the write may have run on the
    // importing node (ask-watch.ts), so that node's replicas must have it too. Which of the two ran it is not
    // known here; a WAIT on a node that ran none of it returns at once.
    const asked = this.asks.nodesAsked(slot);
    if (asked.length > 0) {
      const nodes = [nodeKey, ...asked.filter((n) => n !== nodeKey)];
      return Promise.all(nodes.map((n) => this.waitOn(n))).then(() => {});
    }
    return this.waitOn(nodeKey);
  }

  /** Resolves once a WAIT on `nodeKey` sent after this call returns enough replicas (one WAIT per node at a
   * time, shared by every caller that queued behind it). */
  private waitOn(nodeKey: string): Promise<void> {
    let queue = this.queues.get(nodeKey);
    if (!queue) {
      queue = { busy: false, waiting: [] };
      this.queues.set(nodeKey, queue);
    }
    const q = queue;
    return new Promise<void>((resolve, reject) => {
      q.waiting.push({ resolve, reject });
      if (!q.busy) void this.flush(nodeKey, q);
    });
  }

  /**
   * Sends `commands` on master `nodeKey`'s connection followed by one WAIT, in one write: the WAIT covers
   * their writes without a round trip of its own (afterWrite sends it only once a write's reply is back).
   * Undefined when that master has no ready connection (the caller takes the ordinary path). `ack`: null when
   * enough replicas acknowledged, else why not; `results` as ioredis's pipeline gives them, one per command.
   */
  async pipelineWithWait(
    nodeKey: string,
    commands: readonly Command[],
  ): Promise<{ results: [Error | null, unknown][]; ack: ReplicationTimeout | null } | undefined> {
    const out = await sendOnMaster(this.cluster, nodeKey, commands, ['wait', this.replicas, this.timeoutMs]);
    if (!out) return undefined;
    const [waitErr, acked] = out[commands.length]!;
    let ack: ReplicationTimeout | null = null;
    if (waitErr) ack = new ReplicationTimeout(`WAIT on ${nodeKey} failed: ${waitErr.message}`);
    else if ((acked as number) < this.replicas) {
      ack = new ReplicationTimeout(`write not acknowledged by ${this.replicas} replica(s) of ${nodeKey} within ${this.timeoutMs} ms`);
    }
    return { results: out.slice(0, commands.length), ack };
  }

  private node(nodeKey: string): Redis | undefined {
    return masterConnection(this.cluster, nodeKey);
  }

  private async flush(nodeKey: string, q: NodeQueue): Promise<void> {
    q.busy = true;
    while (q.waiting.length > 0) {
      const batch = q.waiting.splice(0);
      try {
        const node = this.node(nodeKey);
        if (!node) throw new ReplicationTimeout(`master ${nodeKey} is not connected`);
        const acked = (await node.wait(this.replicas, this.timeoutMs)) as number;
        if (acked < this.replicas) {
          throw new ReplicationTimeout(`write not acknowledged by ${this.replicas} replica(s) of ${nodeKey} within ${this.timeoutMs} ms`);
        }
        for (const w of batch) w.resolve();
      } catch (err) {
        const e = err instanceof ReplicationTimeout ? err : new ReplicationTimeout(`WAIT on ${nodeKey} failed: ${(err as Error).message}`);
        for (const w of batch) w.reject(e);
      }
    }
    q.busy = false;
  }
}
