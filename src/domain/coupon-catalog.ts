// Coupon definitions (shards, tags, limit) never change after creation, so each instance keeps them in
// memory: the Deduct hot path never touches MySQL. The sale settings (window, pause) do change: they are
// applied when announced (src/domain/sale.ts) and re-read in the background at most every few seconds per
// coupon, off the hot path, so a lost announcement heals (a coupon idle for longer has them read before it
// is served again); the coupons due for that re-read are read together,
// up to SALE_REFRESH_BATCH per query, so serving 10,000 coupons costs a few queries a second, not one per coupon. Unknown ids are remembered briefly (a bounded table,
// oldest dropped first) so a flood of calls for a coupon that does not exist cannot turn into a flood of
// queries, and lookups running at once are bounded so a flood of *distinct* unknown ids cannot either: beyond
// the bound a call is refused UNAVAILABLE with a retry hint before it reaches MySQL.
import { DomainError, notFound, unavailable } from './errors.js';
import type { Coupon, CouponRepository, SaleSettings } from './ports.js';

const MISSING_TTL_MS = 1000;
/** How often a served coupon's sale settings are re-read from MySQL (in the background). */
const SALE_REFRESH_MS = 5000;
/** A copy whose sale settings were last asked for longer ago than this (no call kept them fresh: the coupon sat
 * idle) is not served before they are read again, so a pause this instance missed stops its sales within the
 * re-read interval rather than after the next burst was already sold. If the read fails the copy is served. */
const SALE_STALE_MS = SALE_REFRESH_MS + 1000;
const MAX_ENTRIES = 100_000;
/** Coupons whose sale settings one background query re-reads at most. */
const SALE_REFRESH_BATCH = 500;
/** How long due coupons gather before their query goes out: in the background, and when calls wait for it (a
 * stale copy). Waiting calls gathered for the background's 100 ms too, and with 10,000 coupons a fifth of the
 * calls found their coupon idle past SALE_STALE_MS: many coupons fell from 0.46x to 0.35x of the flash sale
 * rate, p50 105 ms, with the service at half a core (npm run bench, many-coupons). */
const SALE_REFRESH_GATHER_MS = 100;
const SALE_STALE_GATHER_MS = 2;
/** Unknown ids remembered at most (each for MISSING_TTL_MS). */
export const MAX_MISSING = 10_000;
/** MySQL lookups of coupons not in memory running at once (the pool has 16 connections). */
export const MAX_LOOKUPS = 256;

export class CouponCatalog {
  private readonly known = new Map<string, Coupon>();
  private readonly missing = new Map<string, number>();
  private readonly loading = new Map<string, Promise<Coupon | null>>();
  private readonly checkedAt = new Map<string, number>();
  /** Coupons whose sale settings are due for the next background read. */
  private readonly saleDue = new Set<string>();
  private saleTimer: NodeJS.Timeout | undefined;
  private saleTimerMs = 0;
  /** A read is out: the coupons due meanwhile wait for the next, which is scheduled when it ends. */
  private reading = false;
  /** Some call waits for the next read (a stale copy), not only the background. */
  private saleWaited = false;
  /** Stale copies being read again: calls for them wait for that read too, not only the one that started it. */
  private readonly staleReads = new Map<string, Promise<void>>();
  /** Settled when the next background read (the one the due coupons wait for) is over. */
  private nextRead: { done: Promise<void>; settle: () => void } | undefined;
  /** Background sale queries sent (for tests). */
  saleQueries = 0;

  constructor(private readonly repo: CouponRepository) {}

  /** The coupon if it is in memory, without a promise: the Deduct hot path (every call of a sale asks for a
   * coupon served a moment ago) then takes no await before its Redis call. Schedules the background sale
   * re-read as get() does; undefined means get() must look the coupon up (or re-read a stale copy's sale). */
  cached(id: string): Coupon | undefined {
    const hit = this.known.get(id);
    if (hit) {
      const age = Date.now() - (this.checkedAt.get(id) ?? 0);
      if (age > SALE_STALE_MS || this.staleReads.has(id)) return undefined;
      if (age > SALE_REFRESH_MS) void this.refreshSale(id);
    }
    return hit;
  }

  async get(id: string): Promise<Coupon> {
    const hit = this.cached(id);
    if (hit) return hit;
    if (this.known.has(id)) {
      let read = this.staleReads.get(id);
      if (!read) {
        read = this.refreshSale(id, true).finally(() => this.staleReads.delete(id));
        this.staleReads.set(id, read);
      }
      await read;
      const fresh = this.known.get(id);
      if (fresh) return fresh;
    }
    const missUntil = this.missing.get(id);
    if (missUntil !== undefined && missUntil > Date.now()) throw notFound(`coupon ${id} does not exist`);
    let pending = this.loading.get(id);
    if (!pending) {
      if (this.loading.size >= MAX_LOOKUPS) {
        throw new DomainError('unavailable', `too many coupon lookups at once; retry after 50 ms`, { retryAfterMs: 50 });
      }
      pending = this.repo.find(id).finally(() => this.loading.delete(id));
      this.loading.set(id, pending);
    }
    let coupon: Coupon | null;
    try {
      coupon = await pending;
    } catch (err) {
      throw unavailable('the database cannot be reached', err);
    }
    if (!coupon) {
      // Insertion order is expiry order (one TTL for all): the first entries are the oldest.
      this.missing.delete(id);
      for (const k of this.missing.keys()) {
        if (this.missing.size < MAX_MISSING) break;
        this.missing.delete(k);
      }
      this.missing.set(id, Date.now() + MISSING_TTL_MS);
      throw notFound(`coupon ${id} does not exist`);
    }
    this.remember(coupon);
    return this.known.get(id) ?? coupon;
  }

  /** The coupon if it is in memory now (no lookup, no refresh): for background work that must not query. */
  peek(id: string): Coupon | undefined {
    return this.known.get(id);
  }

  remember(coupon: Coupon): void {
    if (this.known.size > MAX_ENTRIES) {
      this.known.clear();
      this.checkedAt.clear();
    }
    const held = this.known.get(coupon.id)?.sale;
    // A newer sale change may have been announced while this copy was read.
    this.known.set(coupon.id, held && coupon.sale && held.revision > coupon.sale.revision ? { ...coupon, sale: held } : coupon);
    this.checkedAt.set(coupon.id, Date.now());
    this.missing.delete(coupon.id);
  }

  /** Unknown ids remembered right now (bounded by MAX_MISSING). */
  get missingSize(): number {
    return this.missing.size;
  }

  /** Takes a sale change if it is newer than the one held (announcements may arrive late or twice). */
  applySale(id: string, sale: SaleSettings): void {
    const c = this.known.get(id);
    if (!c || (c.sale && c.sale.revision >= sale.revision)) return;
    this.known.set(id, { ...c, sale });
  }

  /** Settles when the read that includes `id` is over (whether it succeeded or not). waited: a call waits for
   * it, so the due coupons gather for SALE_STALE_GATHER_MS only. */
  private refreshSale(id: string, waited = false): Promise<void> {
    this.checkedAt.set(id, Date.now());
    this.saleDue.add(id);
    if (waited) this.saleWaited = true;
    if (!this.nextRead) {
      let settle = () => {};
      const done = new Promise<void>((r) => (settle = r));
      this.nextRead = { done, settle };
    }
    if (!this.reading) this.scheduleRead();
    return this.nextRead.done;
  }

  /** The next read's timer, made shorter when a call starts waiting for it. */
  private scheduleRead(): void {
    const gather = this.saleWaited ? SALE_STALE_GATHER_MS : SALE_REFRESH_GATHER_MS;
    if (this.saleTimer && this.saleTimerMs <= gather) return;
    if (this.saleTimer) clearTimeout(this.saleTimer);
    this.saleTimerMs = gather;
    this.saleTimer = setTimeout(() => this.readDueSales(), gather);
    // A background refresh must never keep a process alive.
    this.saleTimer.unref?.();
  }

  private async readDueSales(): Promise<void> {
    this.saleTimer = undefined;
    this.reading = true;
    this.saleWaited = false;
    const ids = [...this.saleDue];
    this.saleDue.clear();
    // Coupons due while this read runs wait for the next one.
    const read = this.nextRead;
    this.nextRead = undefined;
    try {
      for (let i = 0; i < ids.length; i += SALE_REFRESH_BATCH) {
        this.saleQueries++;
        const sales = await this.repo.saleSettings(ids.slice(i, i + SALE_REFRESH_BATCH));
        for (const [id, sale] of sales) this.applySale(id, sale);
      }
    } catch {
      // The next refresh tries again; announcements keep working meanwhile.
    } finally {
      read?.settle();
      this.reading = false;
      if (this.saleDue.size > 0) this.scheduleRead();
    }
  }

  /** Coupons this instance has served: what its sweepers look after. */
  active(): Coupon[] {
    return [...this.known.values()];
  }
}
