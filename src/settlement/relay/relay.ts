// Relay: Redis outbox streams -> JetStream. It reads the shards it looks after through the `relay` consumer
// group, publishes the events (message id = event id, so JetStream drops a repeat), and only after JetStream
// acknowledged an event removes it from the outbox. A publish that failed stays in this consumer's pending
// list and is retried; entries a dead instance had taken are claimed after claimIdleMs.
//
// Pipelined: reads, publishes and removals of different shards overlap, and a shard is read again as soon as
// its previous read is handed to the publish window (up to `batch` of its entries in flight), not after the
// slowest PubAck of a whole pass. One window of `inFlight` publishes is shared by all shards. A shard with a
// backlog (its last read was full) is read again at once; one that is caught up is polled every pollMs, and
// one that had nothing less and less often.
//
// Which shards: those of coupons this instance serves (the catalog), plus coupons found by a slower walk over
// MySQL whose outboxes are not empty (a crashed instance's coupons that no live instance served yet).
import type { Coupon, ShardRef } from '../../domain/ports.js';
import { allShards } from '../../domain/routing.js';
import type { Logger } from '../../util/logger.js';
import { Stoppable } from '../stoppable.js';
import { unreadableEventId } from '../../domain/ids.js';
import { eventId, encodeEvent, type OutboxEvent } from '../event.js';
import type { OutboxEntry, OutboxStreams } from './outbox.js';
import type { RelayStats } from '../stats.js';

export interface EventPublisher {
  /** Resolves once JetStream stored the message (or already had its id); rejects otherwise. */
  /** On the coupon's settlement subject (nats/subjects.ts). */
  publish(couponId: string, msgId: string, data: Uint8Array): Promise<'stored' | 'duplicate'>;
}

export interface CouponSource {
  /** Coupons this instance serves now. */
  active(): Coupon[];
  /** Candidates from MySQL for the slow walk (recently created/settled, plus one page of all). */
  discover(): Promise<Coupon[]>;
}

export interface RelayOptions {
  /** Entries read per shard per read; also the most of one shard's entries in flight. */
  batch: number;
  /** Publishes in flight at once over all shards. Default 2 × batch. */
  inFlight?: number;
  /** Poll interval of a shard that had nothing to relay, doubling while it stays empty. Default 50 ms. */
  pollMs?: number;
  /** An idle shard is polled less and less often, down to once per this. Default 1000 ms. */
  idlePollMaxMs?: number;
  /** Entries pending this long at another consumer are taken over. */
  claimIdleMs: number;
  /** How often backlog is measured and dead consumers' entries are claimed. */
  sweepIntervalMs: number;
  /** Every this many sweeps, MySQL is asked for coupons to look at (the first sweep always asks). Default 15. */
  discoverEverySweeps?: number;
  /** Writes made on this instance (outbox-writes.ts): a shard written is read within nudgeGapMs of its last
   * read instead of at its next poll. */
  nudges?: { listen(fn: (shard: ShardRef) => void): () => void } | undefined;
  /** Least time between two reads of a shard that nudges bring forward. Default 10 ms. */
  nudgeGapMs?: number;
}

interface ShardState {
  ref: ShardRef;
  /** This consumer holds entries whose publish failed: read them again first. */
  dirty: boolean;
  idleStreak: number;
  nextPollAt: number;
  /** When its last read started. */
  lastReadAt: number;
  /** Written on this instance since its last read started (a nudge). */
  nudged: boolean;
  /** A read of this shard is running. */
  reading: boolean;
  /** Stream ids of this shard handed to the publish window and not removed yet. */
  inFlight: Set<string>;
}

interface Job {
  s: ShardState;
  entry: OutboxEntry;
  ok: boolean;
  done: () => void;
}

const encoder = new TextEncoder();
const MIN_LAUNCH_GAP_MS = 5;

export class Relay {
  private readonly shards = new Map<string, ShardState>();
  /** Coupons found through MySQL with a non-empty outbox, kept until it is empty. */
  private readonly discovered = new Map<string, Coupon>();
  private readonly state = new Stoppable();
  private lastSweep = 0;
  private sweeps = 0;
  private discoverDue = true;
  /** Publishes waiting for a place in the window, and how many are in flight. */
  private readonly queue: Job[] = [];
  private queueHead = 0;
  private publishing = 0;
  /** Reads and chunks (read -> publish -> remove) still running. */
  private readonly work = new Set<Promise<void>>();
  private wakeLoop: (() => void) | undefined;
  private failures = 0;
  private listed: ShardState[] | undefined;
  /** Each listed coupon's shard tags (as the coupon object holds them) and shard states. */
  private readonly byCoupon = new Map<string, { tags: readonly string[]; states: ShardState[] }>();
  private listedAt = 0;
  /** When the loop's current nap ends (a nudge due earlier wakes it). */
  private napUntil = 0;
  /** No shard is due before this (launch skips its walk until then); 0 = walk at the next launch. */
  private dueAt = 0;
  private unlisten: (() => void) | undefined;

  constructor(
    private readonly outbox: OutboxStreams,
    private readonly publisher: EventPublisher,
    private readonly coupons: CouponSource,
    private readonly stats: RelayStats,
    private readonly options: RelayOptions,
    private readonly log?: Logger,
  ) {}

  start(): this {
    this.unlisten = this.options.nudges?.listen((shard) => this.nudge(shard));
    this.state.start(() => this.run());
    return this;
  }

  stop(): Promise<void> {
    this.unlisten?.();
    this.wakeLoop?.();
    return this.state.stop();
  }

  /** A call on this instance wrote the shard's outbox: read it soon (at most once per nudgeGapMs), not at its
   * next poll. Called on the Deduct path: a lookup and a comparison, and a wake-up at most once per nap. A
   * shard not listed yet is found by the next listing (within pollMs). */
  private nudge(ref: ShardRef): void {
    const s = this.shards.get(shardId(ref));
    if (!s || s.nudged) return;
    s.nudged = true;
    // A read running now may have missed this write: readShard brings its next read forward when it ends.
    if (s.reading) return;
    this.soon(s);
  }

  /** The shard's next read at most nudgeGapMs after its last one; wakes the loop if it would sleep past it. */
  private soon(s: ShardState): void {
    const at = s.lastReadAt + (this.options.nudgeGapMs ?? 10);
    if (s.nextPollAt <= at) return;
    this.schedule(s, at);
    s.idleStreak = 0;
    if (this.napUntil > at) this.wakeLoop?.();
  }

  private get window(): number {
    return this.options.inFlight ?? this.options.batch * 2;
  }

  private async run(): Promise<void> {
    try {
      while (this.state.running) {
        try {
          if (Date.now() - this.lastSweep >= this.options.sweepIntervalMs) {
            this.lastSweep = Date.now();
            await this.sweep();
          }
          const launchedAt = Date.now();
          const next = this.launch();
          // Woken by any read or chunk finishing (a shard may be read again at once), or at the next poll; a
          // launch walks every shard, so at most one per MIN_LAUNCH_GAP_MS however often work finishes.
          await this.nap(next);
          const gap = Date.now() - launchedAt;
          if (gap < MIN_LAUNCH_GAP_MS) await this.state.pause(MIN_LAUNCH_GAP_MS - gap);
        } catch (err) {
          this.failures++;
          this.log?.warn({ err: (err as Error)?.message }, 'relay pass failed');
          await this.state.pause(Math.min(5000, 100 * 2 ** this.failures));
        }
      }
    } finally {
      while (this.work.size > 0) await Promise.allSettled([...this.work]);
    }
  }

  private nap(untilMs: number): Promise<void> {
    const ms = Math.max(1, Math.min(untilMs - Date.now(), this.options.pollMs ?? 50, this.options.sweepIntervalMs));
    this.napUntil = Date.now() + ms;
    return new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(t);
        this.napUntil = 0;
        this.wakeLoop = undefined;
        resolve();
      };
      const t = setTimeout(finish, ms);
      this.wakeLoop = finish;
    });
  }

  private track(p: Promise<void>): void {
    this.work.add(p);
    void p.finally(() => {
      this.work.delete(p);
      this.wakeLoop?.();
    });
  }

  /** The shard list, rebuilt from the coupon sources at most once per poll interval. */
  private shardList(): ShardState[] {
    const now = Date.now();
    if (this.listed && now - this.listedAt < (this.options.pollMs ?? 50)) return this.listed;
    this.listedAt = now;
    return this.refreshShards();
  }

  /** Rebuilt only for coupons that are new or whose shards changed: with 10,000 coupons, building every shard's
   * key 20 times a second was a measurable share of an idle instance's CPU. */
  private refreshShards(): ShardState[] {
    const seen = new Set<string>();
    let changed = !this.listed;
    for (const coupon of [...this.coupons.active(), ...this.discovered.values()]) {
      if (seen.has(coupon.id)) continue;
      seen.add(coupon.id);
      const had = this.byCoupon.get(coupon.id);
      if (had?.tags === coupon.shardTags) continue;
      changed = true;
      const states = allShards(coupon).map((ref) => this.shards.get(shardId(ref)) ?? newShardState(ref));
      for (const old of had?.states ?? []) if (!states.includes(old)) this.shards.delete(shardId(old.ref));
      for (const st of states) this.shards.set(shardId(st.ref), st);
      this.byCoupon.set(coupon.id, { tags: coupon.shardTags, states });
    }
    if (this.byCoupon.size !== seen.size) {
      changed = true;
      for (const [id, c] of this.byCoupon) {
        if (seen.has(id)) continue;
        this.byCoupon.delete(id);
        for (const st of c.states) this.shards.delete(shardId(st.ref));
      }
    }
    if (changed) {
      this.listed = [...this.shards.values()];
      this.dueAt = 0;
    }
    return this.listed ?? [];
  }

  /** Starts a read of every shard that is due, not being read and not full; returns when the next idle shard
   * is due. Nothing new is read while the window's queue is already full. */
  private launch(): number {
    const now = Date.now();
    const shards = this.shardList();
    // Nothing became due since the last walk: with tens of thousands of idle shards, walking them on every
    // wake-up was most of an idle instance's relay CPU.
    if (now < this.dueAt) return this.dueAt;
    let next = now + (this.options.idlePollMaxMs ?? 1000);
    const idle: ShardState[] = [];
    let walked = true;
    for (const s of shards) {
      if (s.reading || s.inFlight.size >= 2 * this.options.batch) continue;
      if (s.nextPollAt > now) {
        next = Math.min(next, s.nextPollAt);
        continue;
      }
      if (this.queue.length - this.queueHead >= this.window) {
        walked = false;
        break;
      }
      // A shard with nothing at its last look, and no write seen here since, is most likely still empty: it is
      // probed with the others of its master in one call and read only if its stream holds something.
      const probe = (s.idleStreak > 0 || s.lastReadAt === 0) && !s.nudged && !s.dirty;
      s.reading = true;
      s.lastReadAt = now;
      s.nudged = false;
      if (probe) idle.push(s);
      else this.track(this.readShard(s, now));
    }
    if (idle.length > 0) this.track(this.probe(idle, now));
    // A shard skipped as busy is scheduled again when its read or chunk ends (schedule, relay).
    this.dueAt = walked ? next : 0;
    return next;
  }

  /** Sets the shard's next read; the next launch walks the shards if that is before every other. */
  private schedule(s: ShardState, at: number): void {
    s.nextPollAt = at;
    if (at < this.dueAt) this.dueAt = at;
  }

  /** Reads those of `idle` whose outbox holds entries; the others count as an empty read. */
  private async probe(idle: ShardState[], now: number): Promise<void> {
    let lengths: number[];
    try {
      lengths = (await this.outbox.backlogs(idle.map((s) => s.ref))).map((b) => b.length);
    } catch {
      // Read them one by one, as before probes: readShard reports what fails.
      lengths = idle.map(() => 1);
    }
    idle.forEach((s, i) => {
      if (lengths[i]! > 0) {
        this.track(this.readShard(s, now));
        return;
      }
      s.reading = false;
      this.idle(s, now);
    });
  }

  /** After a look at the shard that found nothing to relay: the next poll later and later, or soon when it
   * was written here meanwhile. */
  private idle(s: ShardState, now: number): void {
    s.idleStreak++;
    const wait = Math.min((this.options.pollMs ?? 50) * 2 ** s.idleStreak, this.options.idlePollMaxMs ?? 1000);
    // Long waits end on a 100 ms boundary, so that the idle shards of an instance come due together: one
    // walk and one probe per master for all of them, not one for every few.
    this.schedule(s, wait >= 400 ? Math.ceil((now + wait) / 100) * 100 : now + wait);
    if (s.nudged) this.soon(s);
  }

  /** Reads one shard and hands what it got to the publish window; the removal follows the PubAcks. */
  private async readShard(s: ShardState, now: number): Promise<void> {
    let entries: OutboxEntry[];
    const batch = this.options.batch;
    const losses = this.outbox.connectionLosses;
    try {
      // Only with nothing of the shard in flight is its pending list exactly the entries that failed.
      const own = s.dirty && s.inFlight.size === 0 ? await this.outbox.read(s.ref, batch, true) : [];
      const fresh = await this.outbox.read(s.ref, batch);
      if (s.dirty && s.inFlight.size === 0 && own.length < batch) s.dirty = false;
      entries = dedupe([...own, ...fresh]).filter((e) => !s.inFlight.has(e.streamId));
      this.failures = 0;
    } catch (err) {
      // A read whose reply was lost (its connection closed) may still have handed entries to this consumer:
      // they sit in its pending list, which the next read takes first, instead of waiting claimIdleMs.
      s.dirty = true;
      this.failures++;
      this.schedule(s, Date.now() + Math.min(5000, 100 * 2 ** this.failures));
      this.log?.warn({ err: (err as Error)?.message, shard: s.ref.index, couponId: s.ref.couponId }, 'relay: outbox read failed');
      return;
    } finally {
      s.reading = false;
      // The same when the read succeeded after the client sent it again on a new connection.
      if (this.outbox.connectionLosses !== losses) s.dirty = true;
    }
    if (entries.length === 0) {
      this.idle(s, now);
      return;
    }
    s.idleStreak = 0;
    // A full read means a backlog: read again at once. Fewer means caught up: the next poll is soon, without
    // spinning on reads that would return a handful of entries each (or sooner when written here meanwhile).
    this.schedule(s, entries.length >= batch ? 0 : now + (this.options.pollMs ?? 50));
    if (s.nudged) this.soon(s);
    this.track(this.relay(s, entries).then(() => {}));
  }

  /** Publishes one shard's entries through the window and removes those JetStream stored; returns how many. */
  private async relay(s: ShardState, entries: OutboxEntry[]): Promise<number> {
    if (entries.length === 0) return 0;
    for (const e of entries) s.inFlight.add(e.streamId);
    const jobs = await new Promise<Job[]>((resolve) => {
      let left = entries.length;
      const all: Job[] = [];
      const done = () => {
        if (--left === 0) resolve(all);
      };
      for (const entry of entries) {
        const job = { s, entry, ok: false, done };
        all.push(job);
        this.queue.push(job);
      }
      this.pumpPublishes();
    });
    const ids = jobs.filter((j) => j.ok).map((j) => j.entry.streamId);
    try {
      await this.outbox.remove(s.ref, ids);
    } catch (err) {
      // Left in this consumer's pending list: read again (and deduplicated by JetStream) on the next read.
      s.dirty = true;
      this.log?.warn({ err: (err as Error)?.message, entries: ids.length }, 'relay: outbox removal failed; entries will be relayed again');
      return 0;
    } finally {
      for (const e of entries) s.inFlight.delete(e.streamId);
      // It may have been skipped as full.
      this.dueAt = 0;
    }
    const failed = jobs.length - ids.length;
    if (failed > 0)
      this.log?.warn({ failed, relayed: ids.length }, 'relay: some events could not be published; they stay in the outbox and are retried');
    return ids.length;
  }

  private pumpPublishes(): void {
    while (this.publishing < this.window && this.queueHead < this.queue.length) {
      const job = this.queue[this.queueHead++]!;
      // The window counts events: one entry may carry a whole batch of them.
      this.publishing += job.entry.events.length;
      this.publishEntry(job.s.ref, job.entry).then(
        (r) => {
          this.stats.duplicates += r.duplicates;
          this.stats.published += r.stored;
          job.ok = true;
          this.published(job);
        },
        () => {
          this.stats.publishFailures++;
          job.s.dirty = true;
          this.published(job);
        },
      );
    }
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
  }

  private published(job: Job): void {
    this.publishing -= job.entry.events.length;
    job.done();
    this.pumpPublishes();
  }

  /** Publishes every event of one entry; resolves with how many JetStream already had, once all are stored. An
   * entry is removed only when all of its events were stored: a failed one sends the whole entry again
   * later, and the message ids (event ids) make JetStream drop the ones it has. */
  private async publishEntry(shard: ShardRef, entry: OutboxEntry): Promise<{ stored: number; duplicates: number }> {
    const results = await Promise.all(entry.events.map((e, i) => this.publishEvent(shard, entry.streamId, i, e)));
    const duplicates = results.filter((r) => r === 'duplicate').length;
    return { stored: results.length - duplicates, duplicates };
  }

  private publishEvent(shard: ShardRef, streamId: string, index: number, e: OutboxEvent): Promise<'stored' | 'duplicate'> {
    if (e.event) return this.publisher.publish(e.event.couponId, eventId(e.event), encodeEvent(e.event));
    // Not an event the settler can read: pass it on anyway, so it is recorded as an anomaly instead of
    // sitting in the outbox for ever.
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < e.raw.length; i += 2) fields[e.raw[i]!] = e.raw[i + 1]!;
    const id = unreadableEventId(shard.tag, index === 0 ? streamId : `${streamId}/${index}`);
    return this.publisher.publish(shard.couponId, id, encoder.encode(JSON.stringify(fields)));
  }

  /** Backlog and lag figures, dead consumers' entries, and (now and then) coupons nobody here serves. */
  async sweep(): Promise<void> {
    if (this.sweeps++ % (this.options.discoverEverySweeps ?? 15) === 0) this.discoverDue = true;
    if (this.discoverDue) {
      // MySQL being down must not stop the relay: discovery is tried again at the next sweep.
      await this.discover().then(
        () => (this.discoverDue = false),
        (err: unknown) => this.log?.warn({ err: (err as Error)?.message }, 'relay: coupon discovery failed'),
      );
    }
    const shards = this.refreshShards();
    const now = Date.now();
    let total = 0;
    let oldest = now;
    const byShard = new Map<string, number>();
    const nonEmpty = new Set<string>();
    const claimed: { s: ShardState; entries: OutboxEntry[] }[] = [];
    const backlogs = await this.outbox.backlogs(shards.map((s) => s.ref));
    await Promise.all(
      shards.map(async (s, i) => {
        const b = backlogs[i]!;
        byShard.set(shardId(s.ref), b.length);
        total += b.length;
        if (b.length === 0) return;
        nonEmpty.add(s.ref.couponId);
        if (b.oldestMs > 0) oldest = Math.min(oldest, b.oldestMs);
        const entries = await this.outbox.claim(s.ref, this.options.claimIdleMs, this.options.batch);
        if (entries.length > 0) {
          this.stats.claimed += entries.length;
          claimed.push({ s, entries });
        }
      }),
    );
    this.stats.backlogByShard = byShard;
    this.stats.backlogTotal = total;
    this.stats.lagMs = total > 0 ? now - oldest : 0;
    for (const id of this.discovered.keys()) if (!nonEmpty.has(id)) this.discovered.delete(id);
    if (claimed.length > 0) {
      this.log?.info({ entries: claimed.reduce((n, c) => n + c.entries.length, 0) }, 'relay: took over outbox entries of another consumer');
      for (const { s, entries } of claimed)
        this.track(
          this.relay(
            s,
            entries.filter((e) => !s.inFlight.has(e.streamId)),
          ).then(() => {}),
        );
    }
  }

  private async discover(): Promise<void> {
    const active = new Set(this.coupons.active().map((c) => c.id));
    const candidates = (await this.coupons.discover()).filter((c) => !active.has(c.id) && !this.discovered.has(c.id));
    const refs = candidates.flatMap((c) => allShards(c));
    const backlogs = await this.outbox.backlogs(refs);
    const byId = new Map(candidates.map((c) => [c.id, c]));
    refs.forEach((ref, i) => {
      const c = byId.get(ref.couponId);
      if (c && backlogs[i]!.length > 0) this.discovered.set(c.id, c);
    });
  }
}

function shardId(ref: ShardRef): string {
  return `${ref.couponId}#${ref.index}`;
}

function newShardState(ref: ShardRef): ShardState {
  return { ref, dirty: false, idleStreak: 0, nextPollAt: 0, lastReadAt: 0, nudged: false, reading: false, inFlight: new Set() };
}

function dedupe(entries: OutboxEntry[]): OutboxEntry[] {
  const seen = new Set<string>();
  return entries.filter((e) => {
    if (seen.has(e.streamId)) return false;
    seen.add(e.streamId);
    return true;
  });
}
