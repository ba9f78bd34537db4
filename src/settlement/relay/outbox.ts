// The shards' outbox streams in Redis, as the relay and the in-flight count see them. Every service instance
// reads through the consumer group `relay` under its own consumer name, so instances share the work; an entry
// leaves the stream (XACK + XDEL in one MULTI on the shard's slot) only after JetStream stored it.
import type { Cluster } from 'ioredis';
import type { PendingMove, ShardLevel, ShardRef } from '../../domain/ports.js';
import { RELAY_GROUP, shardKeys } from '../../redis/keys.js';
import { masterOf } from '../../redis/master-pipeline.js';
import { Scripts } from '../../redis/scripts.js';
import { parsePendingMoves } from '../../redis/pending-moves.js';
import { parseShardLevel, SHARD_LEVEL_FIELDS } from '../../redis/shard-level.js';
import { fromOutboxEntry, type OutboxEvent, type SettlementEvent } from '../event.js';

export interface OutboxEntry {
  streamId: string;
  /** One or more (one Lua call's events share an entry); an event that does not parse is relayed as-is and
   * becomes a poison message in settlement. */
  events: OutboxEvent[];
}

/** One shard as one MULTI reads it. */
export interface OutboxSnapshot {
  level: ShardLevel;
  /** Moves out of the shard not acknowledged yet. */
  moves: PendingMove[];
  events: SettlementEvent[];
  /** Moves ever started out of the shard: a count that only grows while the shard lives. */
  movesStarted: number;
}

type RawEntries = [string, string[]][];

function entries(raw: RawEntries | null | undefined): OutboxEntry[] {
  return (raw ?? []).filter((e) => Array.isArray(e[1])).map(([streamId, fields]) => ({ streamId, events: fromOutboxEntry(fields) }));
}

/** Milliseconds part of a stream id: when the entry was added. */
export function streamIdMs(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

function isNoGroup(err: unknown): boolean {
  return String((err as Error)?.message).startsWith('NOGROUP');
}

/** Streams per outbox-probe-1.lua call: one call stays well under a millisecond of Redis time. */
const PROBE_CHUNK = 500;

export interface Backlog {
  length: number;
  /** When the oldest entry was added (ms), 0 when empty. */
  oldestMs: number;
}

export class OutboxStreams {
  private lost = 0;
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: Cluster,
    private readonly namespace: string,
    private readonly consumer: string,
    idempotencyWindowS: number,
  ) {
    redis.on('-node', () => this.lost++);
    this.scripts = new Scripts(redis, namespace, idempotencyWindowS);
  }

  /** Node connections the client lost so far. A read in flight when one closed may have been delivered, its
   * reply lost, and sent again by the client: what the first delivery handed to this consumer then sits in its
   * pending list, which no reply named (read with own: true). */
  get connectionLosses(): number {
    return this.lost;
  }

  /** The shard's outbox key (Scripts keeps each tag's keys: the relay's idle probes ask for every shard's key
   * each second). */
  key(shard: ShardRef): string {
    return this.scripts.keys(shard).outbox;
  }

  /** Entries never delivered to any relay consumer (own: false) or those delivered to this consumer and not
   * acknowledged yet (own: true: a publish failed and is retried). */
  async read(shard: ShardRef, count: number, own = false): Promise<OutboxEntry[]> {
    const key = this.key(shard);
    try {
      const r = (await this.redis.xreadgroup('GROUP', RELAY_GROUP, this.consumer, 'COUNT', count, 'STREAMS', key, own ? '0' : '>')) as
        | [string, RawEntries][]
        | null;
      const raw = r?.[0]?.[1] ?? [];
      // An entry deleted while still pending comes back without fields: acknowledge it so it leaves the PEL.
      const ghosts = raw.filter((e) => !Array.isArray(e[1])).map((e) => e[0]);
      if (ghosts.length > 0) await this.redis.xack(key, RELAY_GROUP, ...ghosts);
      return entries(raw);
    } catch (err) {
      if (!isNoGroup(err)) throw err;
      // The group is created at shard init; if it was lost (failover before replication), recreate it from
      // the start: everything still in the stream is relayed again and JetStream / the ledger drop repeats.
      await this.redis.xgroup('CREATE', key, RELAY_GROUP, '0', 'MKSTREAM').catch(() => {});
      return [];
    }
  }

  /** Takes over entries another consumer (typically a dead instance) has held for longer than idleMs. */
  async claim(shard: ShardRef, idleMs: number, count: number): Promise<OutboxEntry[]> {
    const out: OutboxEntry[] = [];
    let cursor = '0-0';
    try {
      do {
        const r = (await this.redis.xautoclaim(this.key(shard), RELAY_GROUP, this.consumer, idleMs, cursor, 'COUNT', count)) as [
          string,
          RawEntries,
          string[]?,
        ];
        out.push(...entries(r[1]));
        cursor = r[0];
      } while (cursor !== '0-0' && out.length < count);
    } catch (err) {
      if (!isNoGroup(err)) throw err;
    }
    return out;
  }

  /** Removes relayed entries: acknowledged and deleted together, so none is left behind undeliverable. */
  async remove(shard: ShardRef, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const key = this.key(shard);
    const r = await this.redis
      .multi()
      .xack(key, RELAY_GROUP, ...ids)
      .xdel(key, ...ids)
      .exec();
    const failed = r?.find(([err]) => err);
    if (failed) throw failed[0];
  }

  /** backlog() of many shards, one outbox-probe-1.lua call per master and up to PROBE_CHUNK shards: what the
   * relay's idle polls and sweeps cost then grows with the masters, not the shards. A shard whose master the
   * client has wrong, or a call that failed, is asked about on its own. */
  async backlogs(shards: readonly ShardRef[]): Promise<Backlog[]> {
    const out: (Backlog | undefined)[] = new Array(shards.length);
    const byMaster = new Map<string, number[]>();
    shards.forEach((shard, i) => {
      const master = masterOf(this.redis, this.key(shard)) ?? '';
      const list = byMaster.get(master);
      if (list) list.push(i);
      else byMaster.set(master, [i]);
    });
    const calls: Promise<void>[] = [];
    for (const list of byMaster.values())
      for (let from = 0; from < list.length; from += PROBE_CHUNK) {
        const chunk = list.slice(from, from + PROBE_CHUNK);
        calls.push(
          this.scripts.outboxProbe(chunk.map((i) => this.key(shards[i]!))).then(
            (r) => {
              chunk.forEach((i, j) => {
                const b = r[j];
                if (b) out[i] = { length: b.length, oldestMs: b.length > 0 && b.oldestId ? streamIdMs(b.oldestId) : 0 };
              });
            },
            () => {},
          ),
        );
      }
    await Promise.all(calls);
    return Promise.all(shards.map((shard, i) => out[i] ?? this.backlog(shard)));
  }

  /** Entries in the stream and the age of the oldest (0 when empty). */
  async backlog(shard: ShardRef): Promise<Backlog> {
    const key = this.key(shard);
    const [length, first] = await Promise.all([this.redis.xlen(key), this.redis.xrange(key, '-', '+', 'COUNT', 1)]);
    return { length, oldestMs: first.length > 0 ? streamIdMs(first[0]![0]) : 0 };
  }

  /** One shard's level, the moves out of it not yet acknowledged (their units are its `transit`) and every
   * event still in its outbox, read in one MULTI (same slot) so they agree. */
  async snapshot(shard: ShardRef, pageSize = 10_000): Promise<OutboxSnapshot> {
    const keys = shardKeys(this.namespace, shard.tag);
    const r = await this.redis
      .multi()
      .hmget(keys.shard, ...SHARD_LEVEL_FIELDS)
      .xrange(keys.outbox, '-', '+', 'COUNT', pageSize)
      .xrevrange(keys.outbox, '+', '-', 'COUNT', 1)
      .hgetall(keys.moves)
      .hget(keys.shard, 'mo')
      .exec();
    const failed = r?.find(([err]) => err);
    if (!r || failed) throw failed?.[0] ?? new Error('outbox snapshot: MULTI aborted');
    const level = parseShardLevel(shard.index, r[0]![1] as (string | null)[]);
    const moves = parsePendingMoves(r[3]![1] as Record<string, string>);
    let page = entries(r[1]![1] as RawEntries);
    const lastId = (r[2]![1] as RawEntries)[0]?.[0];
    const events: SettlementEvent[] = [];
    for (;;) {
      for (const e of page) for (const o of e.events) if (o.event) events.push(o.event);
      if (page.length < pageSize || !lastId) break;
      // Later pages: only up to the last entry of the snapshot, so entries added since are not counted.
      const from = `(${page[page.length - 1]!.streamId}`;
      page = entries((await this.redis.xrange(keys.outbox, from, lastId, 'COUNT', pageSize)) as RawEntries);
      if (page.length === 0) break;
    }
    return { level, moves, events, movesStarted: Number(r[4]![1] ?? 0) };
  }

  /** How many moves have started out of the shard (lua/move-out-2.lua counts them), as snapshot() reads it. */
  async movesStarted(shard: ShardRef): Promise<number> {
    return Number((await this.redis.hget(shardKeys(this.namespace, shard.tag).shard, 'mo')) ?? 0);
  }

  /** Which of `creditIds` were applied on the shard (a move's credit: its units landed there). */
  async credited(shard: ShardRef, creditIds: string[]): Promise<boolean[]> {
    if (creditIds.length === 0) return [];
    const scores = await this.redis.zmscore(shardKeys(this.namespace, shard.tag).credits, ...creditIds);
    return scores.map((score) => score !== null);
  }
}
