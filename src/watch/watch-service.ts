// WatchStock: the coupon's current level, then its changes, at most one message per interval per stream.
// Streams on one instance share one CouponFeed per coupon (one NATS subscription, one read per interval);
// each stream holds only a LevelSlot, so a slow or stalled reader costs one level, not a queue. A stream that
// ends for any reason (cancel, deadline, disconnect, shutdown) gives back its slot, timer and abort listener,
// and the last stream of a coupon closes its feed and NATS subscription.
import type { StockLevel } from '../domain/model.js';
import type { Coupon } from '../domain/ports.js';
import * as v from '../domain/validate.js';
import { CouponFeed, levelSignature, type FeedTiming } from './coupon-feed.js';
import { LevelSlot } from './level-slot.js';

export interface WatchDeps {
  /** Throws NOT_FOUND for an unknown coupon (cached, so a flood of unknown ids does not reach MySQL). */
  coupon(couponId: string): Promise<Coupon>;
  /** A fresh level with its shards (Redis + MySQL). */
  readLevel(couponId: string): Promise<StockLevel>;
  /** Subscribes to the coupon's change pings; returns the unsubscribe. */
  listen(couponId: string, onChange: () => void): () => void;
  /** The floor and default of a stream's interval. */
  floorMs: number;
  onError(what: string, err: unknown): void;
  /** A stream ends normally after this long (the client reconnects); default unbounded. */
  maxLifetimeMs?: number | undefined;
  settleRefreshMs?: number;
  heartbeatMs?: number;
}

/** A stream may ask for a slower pace, up to this. */
export const MAX_INTERVAL_MS = 60_000;

export interface WatchStats {
  /** Coupons with at least one local stream. */
  feeds: number;
  /** Open streams. */
  streams: number;
  /** Armed timers: feeds' refreshes and streams' pacing. */
  timers: number;
  /** Levels waiting in slots (at most two per stream). */
  pendingLevels: number;
}

export class WatchService {
  private readonly feeds = new Map<string, CouponFeed>();
  private readonly timing: FeedTiming;
  private closed = false;
  opened = 0;
  ended = 0;

  constructor(private readonly d: WatchDeps) {
    this.timing = {
      floorMs: d.floorMs,
      settleRefreshMs: d.settleRefreshMs ?? Math.max(1000, d.floorMs),
      heartbeatMs: d.heartbeatMs ?? Math.max(5000, d.floorMs),
    };
  }

  intervalFor(requestedMs: number): number {
    return Math.min(MAX_INTERVAL_MS, Math.max(this.d.floorMs, requestedMs > 0 ? requestedMs : this.d.floorMs));
  }

  async *watch(couponIdRaw: string, minIntervalMs: number, signal: AbortSignal): AsyncGenerator<StockLevel> {
    const couponId = v.couponId(couponIdRaw);
    const interval = this.intervalFor(minIntervalMs);
    await this.d.coupon(couponId);
    if (signal.aborted || this.closed) return;

    const slot = new LevelSlot();
    const feed = this.acquire(couponId);
    feed.slots.add(slot);
    this.opened++;
    const onAbort = () => slot.close();
    signal.addEventListener('abort', onAbort, { once: true });
    const expiry = this.d.maxLifetimeMs ? setTimeout(onAbort, this.d.maxLifetimeMs) : undefined;
    try {
      const first = await feed.current();
      if (signal.aborted) return;
      let sentSig = levelSignature(first);
      let sentAt = Date.now();
      yield first;
      while (await slot.ready()) {
        const wait = sentAt + interval - Date.now();
        if (wait > 0 && !(await slot.sleep(wait))) break;
        const next = slot.shift();
        if (!next) continue;
        const sig = levelSignature(next);
        if (sig === sentSig) continue;
        sentSig = sig;
        sentAt = Date.now();
        yield next;
      }
    } finally {
      if (expiry) clearTimeout(expiry);
      signal.removeEventListener('abort', onAbort);
      slot.close();
      feed.slots.delete(slot);
      if (feed.slots.size === 0 && this.feeds.get(couponId) === feed) {
        this.feeds.delete(couponId);
        feed.close();
      }
      this.ended++;
    }
  }

  stats(): WatchStats {
    let streams = 0;
    let timers = 0;
    let pendingLevels = 0;
    for (const f of this.feeds.values()) {
      if (f.hasTimer) timers++;
      for (const s of f.slots) {
        streams++;
        pendingLevels += s.size;
        if (s.hasTimer) timers++;
      }
    }
    return { feeds: this.feeds.size, streams, timers, pendingLevels };
  }

  /** The watched coupons with the most streams, with their last level: bounded per-coupon metrics. */
  busiest(limit: number): { couponId: string; streams: number; level: StockLevel | undefined }[] {
    return [...this.feeds.values()]
      .map((f) => ({ couponId: f.couponId, streams: f.slots.size, level: f.last }))
      .sort((a, b) => b.streams - a.streams)
      .slice(0, limit);
  }

  /** Ends every stream (shutdown): each sends nothing more and completes normally. */
  close(): void {
    this.closed = true;
    for (const f of this.feeds.values()) for (const s of f.slots) s.close();
  }

  private acquire(couponId: string): CouponFeed {
    let feed = this.feeds.get(couponId);
    if (!feed) {
      feed = new CouponFeed(
        couponId,
        () => this.d.readLevel(couponId),
        (cb) => this.d.listen(couponId, cb),
        this.timing,
        this.d.onError,
      );
      this.feeds.set(couponId, feed);
    }
    return feed;
  }
}
