// Fences the slots whose master just changed (a failover, or a slot migration) until the new master is
// confirmed able to honour the ack level: at `replica` level until a replica of it is online again (until
// then every WAIT would time out, so writes fail fast instead of each holding a call for the WAIT timeout),
// at `leader` level until it answers as a master. A fenced write is refused UNAVAILABLE with
// `retry-after-ms`; the caller retries with the same request_id. What the fence does not do (recover writes
// a `leader` master acknowledged and lost) is spelled out in docs/guarantees.md.
import type { Cluster, Redis } from 'ioredis';
import { slotOf } from './key-slot.js';
import { masterOf } from './master-pipeline.js';
import type { AckLevel } from '../config.js';
import { DomainError } from '../domain/errors.js';

const SLOTS = 16384;

export interface FenceEvent {
  /** The new master, host:port. */
  node: string;
  slots: number;
  /** Previous masters of those slots. */
  previous: string[];
}

export interface FailoverFenceOptions {
  ackLevel: AckLevel;
  /** Replicas a `replica` ack waits for (SHARDSTOCK_ACK_REPLICAS): the fence lifts when that many are online. Default 1. */
  replicas?: number | undefined;
  /** How often a fenced master is re-checked. Default 100 ms. */
  pollMs?: number | undefined;
  onFenced?: ((e: FenceEvent) => void) | undefined;
  onReopened?: ((e: { node: string; slots: number; fencedMs: number }) => void) | undefined;
}

interface Fence {
  since: number;
  slots: Set<number>;
  previous: Set<string>;
}

export class FailoverFence {
  private readonly owners: (string | undefined)[] = new Array(SLOTS);
  private readonly fencedSlot = new Uint8Array(SLOTS);
  private readonly fences = new Map<string, Fence>();
  private timer: NodeJS.Timeout | undefined;
  /** A check is out: the next is scheduled when it ends. */
  private checking = false;
  private stopped = false;
  private readonly pollMs: number;
  readonly stats = { fences: 0, refused: 0, lastFencedMs: 0 };
  private readonly onRefresh = () => this.scan();

  constructor(
    private readonly cluster: Cluster,
    private readonly options: FailoverFenceOptions,
  ) {
    this.pollMs = options.pollMs ?? 100;
    for (let s = 0; s < SLOTS; s++) this.owners[s] = cluster.slots[s]?.[0];
    cluster.on('refresh', this.onRefresh);
  }

  /** The slot's master right now, as the client routes to it. */
  owner(key: string): string | undefined {
    return masterOf(this.cluster, key);
  }

  /** Throws UNAVAILABLE when `key`'s slot is fenced. Also notices an owner change the client learnt from a
   * MOVED reply before its next slot-map refresh. */
  assertOpen(key: string): void {
    const slot = slotOf(key);
    const now = this.cluster.slots[slot]?.[0];
    if (now !== undefined && now !== this.owners[slot]) this.changed(new Map([[now, [slot]]]));
    if (this.fencedSlot[slot] === 1) {
      this.stats.refused++;
      throw new DomainError(
        'unavailable',
        `the Redis master of this shard changed (failover); writes resume once ${now ?? 'the new master'} is confirmed` +
          `${this.options.ackLevel === 'replica' ? ' with a replica online' : ''}; retry with the same request_id`,
        { retryAfterMs: this.retryAfterMs(key) },
      );
    }
  }

  /** The retry hint a write to `key` would be refused with now; undefined while its slot is open. */
  retryAfterMs(key: string): number | undefined {
    return this.fencedSlot[slotOf(key)] === 1 ? this.pollMs * 2 : undefined;
  }

  /** Slots fenced right now. */
  get fencedSlots(): number {
    let n = 0;
    for (const f of this.fences.values()) n += f.slots.size;
    return n;
  }

  stop(): void {
    this.stopped = true;
    this.cluster.off('refresh', this.onRefresh);
    if (this.timer) clearTimeout(this.timer);
  }

  private scan(): void {
    const moved = new Map<string, number[]>();
    for (let s = 0; s < SLOTS; s++) {
      const now = this.cluster.slots[s]?.[0];
      if (now === undefined || now === this.owners[s]) continue;
      let list = moved.get(now);
      if (!list) {
        list = [];
        moved.set(now, list);
      }
      list.push(s);
    }
    if (moved.size > 0) this.changed(moved);
  }

  private changed(moved: Map<string, number[]>): void {
    let fresh = false;
    for (const [node, slots] of moved) {
      let fence = this.fences.get(node);
      const isNew = !fence;
      if (!fence) {
        fence = { since: Date.now(), slots: new Set(), previous: new Set() };
        this.fences.set(node, fence);
      }
      for (const s of slots) {
        // The first map after start-up has no previous owner: nothing to fence.
        const before = this.owners[s];
        this.owners[s] = node;
        if (before === undefined) continue;
        fence.previous.add(before);
        fence.slots.add(s);
        this.fencedSlot[s] = 1;
      }
      if (fence.slots.size === 0) {
        this.fences.delete(node);
        continue;
      }
      if (isNew) {
        fresh = true;
        this.stats.fences++;
        this.options.onFenced?.({ node, slots: fence.slots.size, previous: [...fence.previous] });
      }
    }
    if (fresh && this.timer && !this.checking) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.schedule(fresh);
  }

  /** The first check of a new fence goes at once: a slot moved to a master that already has its replicas
   * (a reshard, a planned failover) reopens within a round trip instead of a poll interval. */
  private schedule(now = false): void {
    if (this.timer || this.checking || this.stopped || this.fences.size === 0) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.checking = true;
        void this.checkAll().finally(() => {
          this.checking = false;
          this.schedule();
        });
      },
      now ? 0 : this.pollMs,
    );
    this.timer.unref();
  }

  private async checkAll(): Promise<void> {
    await Promise.all(
      [...this.fences].map(async ([node, fence]) => {
        if (!(await this.ready(node))) return;
        // Slots that moved on again while we checked stay fenced under their newer owner.
        for (const s of fence.slots) if (this.owners[s] === node) this.fencedSlot[s] = 0;
        this.fences.delete(node);
        const fencedMs = Date.now() - fence.since;
        this.stats.lastFencedMs = fencedMs;
        this.options.onReopened?.({ node, slots: fence.slots.size, fencedMs });
      }),
    );
  }

  /** Whether `node` answers as a master and, at `replica` level, has enough replicas online. */
  private async ready(node: string): Promise<boolean> {
    const conn: Redis | undefined = this.cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === node);
    if (!conn) {
      // Not connected yet: the client connects to a new master on first use; a slot refresh will follow.
      this.cluster.refreshSlotsCache();
      return false;
    }
    try {
      const info = await conn.info('replication');
      if (!/^role:master\s*$/m.test(info)) return false;
      if (this.options.ackLevel === 'leader') return true;
      return (info.match(/^slave\d+:.*state=online/gm)?.length ?? 0) >= (this.options.replicas ?? 1);
    } catch {
      return false;
    }
  }
}
