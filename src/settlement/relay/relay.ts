// Relay: Redis outbox streams -> JetStream. Each pass reads the shards it looks after through the `relay`
// consumer group, publishes the events concurrently (message id = event id, so JetStream drops a repeat), and
// only after JetStream acknowledged an event removes it from the outbox. A publish that failed stays in this
// consumer's pending list and is retried; entries a dead instance had taken are claimed after claimIdleMs.
//
// Which shards: those of coupons this instance serves (the catalog), plus coupons found by a slower walk over
// MySQL whose outboxes are not empty (a crashed instance's coupons that no live instance served yet).
import type { Coupon, ShardRef } from '../../domain/ports.js';
import { allShards } from '../../domain/routing.js';
import type { Logger } from '../../util/logger.js';
import { Stoppable } from '../stoppable.js';
import { unreadableEventId } from '../../domain/ids.js';
import { eventId, encodeEvent } from '../event.js';
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
  /** Entries read per shard per pass, and publishes in flight at once. */
  batch: number;
  /** Sleep between passes that found nothing. Default 50 ms. */
  pollMs?: number;
  /** An idle shard is polled less and less often, down to once per this. Default 1000 ms. */
  idlePollMaxMs?: number;
  /** Entries pending this long at another consumer are taken over. */
  claimIdleMs: number;
  /** How often backlog is measured and dead consumers' entries are claimed. */
  sweepIntervalMs: number;
  /** Every this many sweeps, MySQL is asked for coupons to look at (the first sweep always asks). Default 15. */
  discoverEverySweeps?: number;
}

interface ShardState {
  ref: ShardRef;
  /** This consumer holds entries whose publish failed: read them again first. */
  dirty: boolean;
  idleStreak: number;
  nextPollAt: number;
}

const encoder = new TextEncoder();

export class Relay {
  private readonly shards = new Map<string, ShardState>();
  /** Coupons found through MySQL with a non-empty outbox, kept until it is empty. */
  private readonly discovered = new Map<string, Coupon>();
  private readonly state = new Stoppable();
  private lastSweep = 0;
  private sweeps = 0;
  private discoverDue = true;

  constructor(
    private readonly outbox: OutboxStreams,
    private readonly publisher: EventPublisher,
    private readonly coupons: CouponSource,
    private readonly stats: RelayStats,
    private readonly options: RelayOptions,
    private readonly log?: Logger,
  ) {}

  start(): this {
    this.state.start(() => this.run());
    return this;
  }

  stop(): Promise<void> {
    return this.state.stop();
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.state.running) {
      try {
        if (Date.now() - this.lastSweep >= this.options.sweepIntervalMs) {
          this.lastSweep = Date.now();
          await this.sweep();
        }
        const n = await this.pass();
        failures = 0;
        if (n === 0) await this.state.pause(this.options.pollMs ?? 50);
      } catch (err) {
        failures++;
        this.log?.warn({ err: (err as Error)?.message }, 'relay pass failed');
        await this.state.pause(Math.min(5000, 100 * 2 ** failures));
      }
    }
  }

  private refreshShards(): ShardState[] {
    const wanted = new Set<string>();
    for (const coupon of [...this.coupons.active(), ...this.discovered.values()]) {
      for (const ref of allShards(coupon)) {
        const k = `${ref.couponId}#${ref.index}`;
        wanted.add(k);
        if (!this.shards.has(k)) this.shards.set(k, { ref, dirty: false, idleStreak: 0, nextPollAt: 0 });
      }
    }
    for (const k of this.shards.keys()) if (!wanted.has(k)) this.shards.delete(k);
    return [...this.shards.values()];
  }

  /** One round over the shards that are due; returns how many entries were relayed. */
  async pass(): Promise<number> {
    const now = Date.now();
    const due = this.refreshShards().filter((s) => s.nextPollAt <= now);
    const batch = this.options.batch;
    const read = await Promise.all(
      due.map(async (s) => {
        const own = s.dirty ? await this.outbox.read(s.ref, batch, true) : [];
        const fresh = await this.outbox.read(s.ref, batch);
        if (s.dirty && own.length < batch) s.dirty = false;
        const entries = dedupe([...own, ...fresh]);
        if (entries.length === 0) {
          s.idleStreak++;
          s.nextPollAt = now + Math.min((this.options.pollMs ?? 50) * 2 ** s.idleStreak, this.options.idlePollMaxMs ?? 1000);
        } else {
          s.idleStreak = 0;
          s.nextPollAt = 0;
        }
        return { s, entries };
      }),
    );
    return this.relay(read.filter((r) => r.entries.length > 0));
  }

  /** Publishes and, per shard, removes what JetStream stored. */
  private async relay(work: { s: ShardState; entries: OutboxEntry[] }[]): Promise<number> {
    const jobs = work.flatMap(({ s, entries }) => entries.map((entry) => ({ s, entry, ok: false })));
    // A window of `batch` publishes in flight at all times (not batch after batch: no stall on the slowest ack).
    let next = 0;
    const publisher = async () => {
      for (let job = jobs[next++]; job; job = jobs[next++]) {
        try {
          const r = await this.publish(job.s.ref, job.entry);
          if (r === 'duplicate') this.stats.duplicates++;
          else this.stats.published++;
          job.ok = true;
        } catch {
          this.stats.publishFailures++;
          job.s.dirty = true;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(jobs.length, this.options.batch) }, publisher));
    let relayed = 0;
    await Promise.all(
      work.map(async ({ s }) => {
        const ids = jobs.filter((j) => j.s === s && j.ok).map((j) => j.entry.streamId);
        await this.outbox.remove(s.ref, ids);
        relayed += ids.length;
      }),
    );
    const failed = jobs.length - relayed;
    if (failed > 0)
      this.log?.warn({ failed, relayed }, 'relay: some events could not be published; they stay in the outbox and are retried');
    return relayed;
  }

  private publish(shard: ShardRef, entry: OutboxEntry): Promise<'stored' | 'duplicate'> {
    if (entry.event) return this.publisher.publish(entry.event.couponId, eventId(entry.event), encodeEvent(entry.event));
    // Not an event the settler can read: pass it on anyway, so it is recorded as an anomaly instead of
    // sitting in the outbox for ever.
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < entry.raw.length; i += 2) fields[entry.raw[i]!] = entry.raw[i + 1]!;
    return this.publisher.publish(shard.couponId, unreadableEventId(shard.tag, entry.streamId), encoder.encode(JSON.stringify(fields)));
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
    await Promise.all(
      shards.map(async (s) => {
        const b = await this.outbox.backlog(s.ref);
        byShard.set(`${s.ref.couponId}#${s.ref.index}`, b.length);
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
      await this.relay(claimed);
    }
  }

  private async discover(): Promise<void> {
    const active = new Set(this.coupons.active().map((c) => c.id));
    const candidates = (await this.coupons.discover()).filter((c) => !active.has(c.id) && !this.discovered.has(c.id));
    await Promise.all(
      candidates.map(async (c) => {
        const lengths = await Promise.all(allShards(c).map((ref) => this.outbox.backlog(ref).then((b) => b.length)));
        if (lengths.some((n) => n > 0)) this.discovered.set(c.id, c);
      }),
    );
  }
}

function dedupe(entries: OutboxEntry[]): OutboxEntry[] {
  const seen = new Set<string>();
  return entries.filter((e) => (seen.has(e.streamId) ? false : (seen.add(e.streamId), true)));
}
