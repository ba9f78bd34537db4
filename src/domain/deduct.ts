// Deduct: one Lua call on the request's home shard in the common case. When the home shard cannot cover the
// request, units are moved to it from the shards that have them (move-out on each source, credited by the
// next deduct call on the home shard, acknowledged afterwards; a sweeper finishes moves whose mover died),
// so a coupon is sold out only when all of its shards are empty.
import { randomBytes } from 'node:crypto';
import { DomainError, invalid } from './errors.js';
import type { Coupon, DeductInput } from './model.js';
import type { Credit, HoldStore, ShardLevel, StockChanges, StockStore } from './ports.js';
import type { CouponCatalog } from './coupon-catalog.js';
import type { SoldOutCache } from './sold-out-cache.js';
import type { ShardReloader } from './shard-reloader.js';
import type { MoveSweeper } from './move-sweeper.js';
import { moveCreditId, moveIdFor, moveRound } from './ids.js';
import { PausePatience } from './pause-patience.js';
import { allShards, claimShard, homeShard, shardRef } from './routing.js';
import * as v from './validate.js';
import { saleStatus } from './sale.js';

export type DeductOutcome =
  | 'deducted'
  | 'sold_out'
  | 'insufficient'
  | 'user_limit_exceeded'
  /** Refused from the catalog, Redis untouched (src/domain/sale.ts). */
  | 'not_started'
  | 'ended'
  | 'sale_paused';

export interface DeductResult {
  outcome: DeductOutcome;
  replayed: boolean;
  /** A replayed DEDUCTED whose units were given back since (Compensate): the caller no longer holds them. */
  compensated?: boolean;
  /** Units left in the serving shard right after the call. */
  remaining: number;
  shard: number;
  /** Units the caller holds after the call: the quantity (or less, with allowPartial) when deducted, else 0. */
  granted: number;
  /** A new hold's expiry (Reserve), on the Redis server's clock. */
  expiresAtMs?: number;
}

/** Reserve takes its units exactly as Deduct does (routing, claims, fallback moves, sold-out fast path), with
 * hold-reserve-7.lua in place of deduct-7.lua: src/domain/hold-service.ts passes this. */
export interface HoldTake {
  ttlMs: number;
  store: HoldStore;
}

export interface DeductStats {
  fallbacks: number;
  moves: number;
  movedUnits: number;
  soldOutFastPath: number;
  reloads: number;
  /** Moves stranded by a dead mover that this instance's waiting calls landed themselves (landStranded). */
  strandedMovesLanded: number;
}

/** Enough rounds for thousands of callers racing for the last units; each round either lands units on the
 * home shard or sees the coupon empty. */
const MAX_ROUNDS = 24;
/** How long a call waits on units in transit before it lands their move itself (and the youngest move it lands):
 * a live mover lands its move within milliseconds, and the rounds a call has last ~0.6 s. */
const STRANDED_AFTER_MS = 250;

export class DeductService {
  readonly stats: DeductStats = {
    fallbacks: 0,
    moves: 0,
    movedUnits: 0,
    soldOutFastPath: 0,
    reloads: 0,
    strandedMovesLanded: 0,
  };

  constructor(
    private readonly catalog: CouponCatalog,
    private readonly store: StockStore,
    private readonly soldOut: SoldOutCache,
    private readonly reloader: ShardReloader,
    private readonly maxQuantity: number,
    private readonly onError: (what: string, err: unknown) => void = () => {},
    private readonly changes?: StockChanges,
    /** The clock sale windows are judged by (ms since epoch); tests pass their own. */
    private readonly now: () => number = Date.now,
    /** Lands moves stranded by a dead mover that a waiting call has watched for STRANDED_AFTER_MS. */
    private readonly moves?: Pick<MoveSweeper, 'sweepShard'>,
  ) {}

  async deduct(input: DeductInput, signal?: AbortSignal, hold?: HoldTake): Promise<DeductResult> {
    const couponId = v.couponId(input.couponId);
    const requestId = v.requestId(input.requestId);
    const userId = v.optionalId('user_id', input.userId, v.USER_ID_MAX) ?? '';
    const quantity = input.quantity === 0n ? 1 : v.units('quantity', input.quantity, 1n, BigInt(this.maxQuantity));
    const coupon = this.catalog.cached(couponId) ?? (await this.catalog.get(couponId));
    const limit = coupon.perUserLimit;
    if (limit > 0 && userId === '') throw invalid('user_id', `is required: coupon ${couponId} has a per-user limit of ${limit}`);
    const sale = saleStatus(coupon.sale, this.now());
    if (sale !== 'open')
      return {
        outcome: sale === 'paused' ? 'sale_paused' : sale,
        replayed: false,
        remaining: 0,
        shard: homeShard(coupon, requestId, userId),
        granted: 0,
      };
    if (limit > 0 && quantity > limit)
      return { outcome: 'user_limit_exceeded', replayed: false, remaining: 0, shard: homeShard(coupon, requestId, userId), granted: 0 };

    let keepClaim = async () => {};
    if (limit > 0) {
      // A limited coupon routes by user; the request id's own shard keeps who first used it, so reuse with
      // another user or quantity is caught even though it would land on another shard. The claim is held only
      // briefly until the deduction is made, so refused requests leave nothing behind for long.
      const claimed = `${userId}|${quantity}`;
      const claimRef = shardRef(coupon, claimShard(coupon, requestId));
      let prior = await this.store.claimRequest(claimRef, requestId, claimed);
      // The claim's shard is gone with its claims: the recovery puts them back before anyone claims anew.
      for (let i = 0; prior === 'missing' && i < 3; i++) {
        await this.reloader.reload(coupon, claimRef.index);
        prior = await this.store.claimRequest(claimRef, requestId, claimed);
      }
      if (prior === 'missing')
        throw new DomainError('unavailable', `coupon ${couponId} is being recovered; retry with the same request_id`);
      if (prior !== null && prior !== claimed) {
        const [priorUser, priorQty] = prior.split('|');
        throw conflict(requestId, priorUser !== userId ? 'user_id' : 'quantity', priorUser !== userId ? priorUser! : priorQty!);
      }
      keepClaim = () => this.store.keepClaim(claimRef, requestId, claimed);
    }

    const home = homeShard(coupon, requestId, userId);
    const homeRef = shardRef(coupon, home);
    const partial = input.allowPartial === true;
    if (this.soldOut.isSoldOut(couponId)) {
      this.stats.soldOutFastPath++;
      // Each read below answers 'missing' when the home shard lost its data, records and holds with it: only
      // its recovery can tell whether this request took units, so such a call leaves the fast path and the
      // normal path below recovers the shard first (a replay must never be refused SOLD_OUT).
      if (hold) {
        // A retried Reserve must find its hold, as a retried Deduct finds its deduction.
        const h = await hold.store.read(homeRef, requestId);
        if (h !== 'missing') {
          if (!h) return { outcome: 'sold_out', replayed: false, remaining: 0, shard: home, granted: 0 };
          // As hold-reserve-7.lua refuses it: the id is a Deduct's.
          if (h === 'deduction') throw conflict(requestId, 'kind', 'deduct');
          if (h.userId !== userId) throw conflict(requestId, 'user_id', h.userId);
          // A confirmed hold keeps only its confirmed units (hold-reserve-7.lua does not compare them either).
          if (h.state !== 'c' && h.quantity !== quantity) throw conflict(requestId, 'quantity', String(h.quantity));
          await keepClaim();
          return { outcome: 'deducted', replayed: true, remaining: h.remaining, shard: home, granted: h.quantity };
        }
      } else {
        // One plain read keeps replays truthful: a retried request that deducted before the sell-out must get
        // its DEDUCTED back, or its unit would be stranded with a caller who believes it failed.
        const rec = await this.store.readRequest(homeRef, requestId);
        if (rec !== 'missing') {
          if (!rec) return { outcome: 'sold_out', replayed: false, remaining: 0, shard: home, granted: 0 };
          if (rec.reserve) throw conflict(requestId, 'kind', 'reserve');
          if (rec.userId !== userId) throw conflict(requestId, 'user_id', rec.userId);
          if (rec.quantity !== quantity && !(partial && rec.quantity < quantity))
            throw conflict(requestId, 'quantity', String(rec.quantity));
          await keepClaim();
          return replayOf(rec, home);
        }
      }
    }

    // With allowPartial, `want` shrinks to what the coupon has left; each Lua call still takes all of `want`
    // or nothing, so concurrent partial fills add up exactly.
    let want = quantity;
    const req = { requestId, userId, quantity, perUserLimit: limit };
    // Move ids must be new on every call: a retry reusing one would find its credit applied and skip it,
    // destroying the units it had just taken. Made on the first fallback only: most calls never move units.
    let attempt: string | undefined;
    let credits: Credit[] = [];
    let creditEpoch = '';
    let moved: { source: number; moveId: string }[] = [];
    // Made on the first pause only: most calls never meet one.
    let patience: PausePatience | undefined;
    let waitingSince: number | undefined;
    // Before the first read a sell-out could rest on: units returned after it keep this call from marking one.
    const readsBegan = this.soldOut.stamp();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      if (signal?.aborted)
        throw new DomainError('deadline_exceeded', 'the call was cancelled or its deadline passed before it could finish');
      const r = hold
        ? await hold.store.reserve(homeRef, { ...req, quantity: want, ttlMs: hold.ttlMs }, credits, creditEpoch, signal)
        : await this.store.deduct(homeRef, { ...req, quantity: want }, credits, creditEpoch, signal);
      if (r.kind === 'stale_credits') {
        // Not acknowledged: a live source keeps the units in transit until the sweeper lands them.
        credits = [];
        moved = [];
        continue;
      }
      if (r.kind === 'missing') {
        this.stats.reloads++;
        await this.reloader.reload(coupon, home);
        continue;
      }
      if (r.kind === 'paused') {
        patience ??= new PausePatience(couponId);
        await patience.wait(r.waitMs);
        continue;
      }
      if (moved.length > 0) {
        this.ackMoves(coupon, moved);
        credits = [];
        moved = [];
      }
      switch (r.kind) {
        case 'deducted':
          this.changes?.changed(couponId, false);
          // A re-check of an expired sold-out flag found stock (a missed signal): stop refusing.
          this.soldOut.found(couponId);
          await keepClaim();
          return { outcome: 'deducted', replayed: false, remaining: r.remaining, shard: home, granted: want, expiresAtMs: r.expiresAtMs };
        case 'replay':
          await keepClaim();
          return { outcome: 'deducted', replayed: true, compensated: r.compensated, remaining: r.remaining, shard: home, granted: want };
        case 'conflict': {
          // A partial fill recorded fewer units than asked: a replay of it, not a conflict.
          if (partial && r.field === 'quantity' && Number(r.recorded) < quantity) {
            const rec = await this.store.readRequest(homeRef, requestId);
            if (rec && rec !== 'missing' && rec.userId === userId) {
              await keepClaim();
              return replayOf(rec, home);
            }
          }
          throw conflict(requestId, r.field, r.recorded);
        }
        case 'user_limit':
          return { outcome: 'user_limit_exceeded', replayed: false, remaining: 0, shard: home, granted: 0 };
        case 'short': {
          if (round === 0) this.stats.fallbacks++;
          const plan = await this.planFallback(coupon, home, want, r.available, partial);
          if (plan === 'sold_out') {
            this.soldOut.mark(couponId, readsBegan);
            return { outcome: 'sold_out', replayed: false, remaining: 0, shard: home, granted: 0 };
          }
          if (plan === 'insufficient') return { outcome: 'insufficient', replayed: false, remaining: r.available, shard: home, granted: 0 };
          if ('wait' in plan) {
            // Units are travelling between shards; they land within a round trip or two, unless their mover died.
            waitingSince ??= Date.now();
            if (this.moves && Date.now() - waitingSince >= STRANDED_AFTER_MS) await this.landStranded(coupon, plan.wait);
            await sleep(1 + Math.random() * 4 * (round + 1));
            continue;
          }
          if ('lost' in plan) {
            // What the lost shards held is unknown until they are rebuilt: plan again once they are.
            this.stats.reloads++;
            await Promise.all(plan.lost.map((index) => this.reloader.reload(coupon, index)));
            continue;
          }
          if ('shrinkTo' in plan) {
            want = plan.shrinkTo;
            continue;
          }
          attempt ??= randomBytes(6).toString('base64url');
          const taken = await this.moveIn(coupon, home, moveRound(requestId, attempt, round), plan);
          credits = taken.credits;
          moved = taken.moved;
          creditEpoch = r.epoch;
          if (credits.length === 0) await sleep(Math.random() * 2 * (round + 1));
          break;
        }
      }
    }
    throw new DomainError('aborted', `too much contention on coupon ${couponId}; retry with the same request_id`);
  }

  /** Decides from a probe of every shard: sell-out, not enough, wait for units in transit, or where to take from.
   * Fenced shards (their master just changed) cannot give units now: they are never sources, and only when
   * nothing else can cover the request is it refused UNAVAILABLE, to retry once the fence lifts. A lost shard
   * (its hash gone with its master's data) is never a source either, and never counted as empty: when the
   * others cannot cover the request, the answer waits for its rebuild ({ lost }), or a sold-out coupon would be
   * declared while the lost shard's units are still owed to it.
   * The probe's reads are not one snapshot: a move credited on a shard read before it landed and acknowledged at
   * its source read after it left is seen nowhere. Such a move ended before the next probe begins, so each answer
   * that rests on units not being there needs two probes in a row that show it: a sell-out two empty ones (a
   * shortfall before an empty probe is not one), a shortfall (INSUFFICIENT) or a partial fill's shrink two that
   * each fall short (`before`: what the previous probe of this decision showed). */
  private async planFallback(
    coupon: Coupon,
    home: number,
    quantity: number,
    homeAvailable: number,
    partial = false,
    before: 'none' | 'empty' | 'short' = 'none',
  ): Promise<FallbackPlan> {
    const levels = await this.store.probe(allShards(coupon));
    // The home's level as probed, read after its short answer: a move may have landed units there since.
    let homeNow = homeAvailable;
    let available = 0;
    let inTransit = 0;
    let fenced = 0;
    let retryAfterMs = 0;
    const open: ShardLevel[] = [];
    const lost: number[] = [];
    for (const l of levels) {
      inTransit += l.inTransit;
      if (l.index === home) {
        if (l.available !== null) homeNow = l.available;
        available += homeNow;
      } else if (l.available === null) {
        lost.push(l.index);
        continue;
      } else if (l.fencedRetryAfterMs !== undefined) {
        fenced += l.available ?? 0;
        retryAfterMs = Math.max(retryAfterMs, l.fencedRetryAfterMs);
        continue;
      } else available += l.available ?? 0;
      open.push(l);
    }
    if (lost.length > 0 && available < quantity) return { lost };
    if (available + inTransit + fenced === 0)
      return before === 'empty' ? 'sold_out' : this.planFallback(coupon, home, quantity, homeNow, partial, 'empty');
    if (available < quantity) {
      if (inTransit > 0) return { wait: levels.filter((l) => l.inTransit > 0).map((l) => l.index) };
      if (before === 'none') return this.planFallback(coupon, home, quantity, homeNow, partial, 'short');
      // A partial fill takes what the open shards have now; the next round plans for that amount.
      if (partial && available > 0) return { shrinkTo: available };
      if (available + fenced < quantity) return 'insufficient' as const;
      throw new DomainError(
        'unavailable',
        `the units coupon ${coupon.id} has left are on shards whose Redis master just changed; retry with the same request_id`,
        { retryAfterMs },
      );
    }
    return pickSources(open, home, quantity - homeNow);
  }

  private async moveIn(coupon: Coupon, home: number, attempt: string, sources: { index: number; want: number }[]) {
    const credits: Credit[] = [];
    const moved: { source: number; moveId: string }[] = [];
    await Promise.all(
      sources.map(async ({ index, want }) => {
        const moveId = moveIdFor(attempt, index, home);
        let taken: number | 'missing' | 'paused';
        try {
          taken = await this.store.moveOut(shardRef(coupon, index), moveId, home, want);
        } catch (err) {
          // Fenced since the probe: the next round's probe leaves it out.
          if (err instanceof DomainError && err.kind === 'unavailable' && err.retryAfterMs !== undefined) return;
          throw err;
        }
        if (taken === 'missing') {
          this.reloader.reload(coupon, index).catch((err) => this.onError('reload', err));
          return;
        }
        // Being recovered: its units are counted by the recovery; the other sources or a later round serve.
        if (taken === 'paused') return;
        if (taken > 0) {
          this.stats.moves++;
          this.stats.movedUnits += taken;
          credits.push({ id: moveCreditId(moveId), quantity: taken });
          moved.push({ source: index, moveId });
        }
      }),
    );
    return { credits, moved };
  }

  /** As the sweeper would, without waiting for it: a caller would otherwise run out of rounds (ABORTED) for as
   * long as the sweeper takes to come by. Safe against a live mover: its credit is idempotent by move id. */
  private async landStranded(coupon: Coupon, sources: number[]): Promise<void> {
    await Promise.all(
      sources.map((index) =>
        this.moves!.sweepShard(coupon, index, STRANDED_AFTER_MS).then(
          (r) => {
            this.stats.strandedMovesLanded += r.done;
          },
          (err) => this.onError('stranded move', err),
        ),
      ),
    );
  }

  private ackMoves(coupon: Coupon, moved: { source: number; moveId: string }[]): void {
    // Not awaited: an unacknowledged move only keeps its units counted as transit until the sweeper acks it.
    for (const m of moved) {
      this.store.ackMove(shardRef(coupon, m.source), m.moveId).catch((err) => this.onError('move ack', err));
    }
  }
}

type FallbackPlan =
  | 'sold_out'
  | 'insufficient'
  | { wait: number[] }
  | { lost: number[] }
  | { shrinkTo: number }
  | { index: number; want: number }[];

/** Takes from the fullest shards first; spreads ties randomly so racing callers pick different sources. */
export function pickSources(levels: ShardLevel[], home: number, need: number): { index: number; want: number }[] {
  const candidates = levels
    .filter((l) => l.index !== home && (l.available ?? 0) > 0)
    .map((l) => ({ index: l.index, available: l.available!, r: Math.random() }))
    .sort((a, b) => b.available - a.available || a.r - b.r);
  const plan: { index: number; want: number }[] = [];
  let left = need;
  for (const c of candidates) {
    if (left <= 0) break;
    const want = Math.min(c.available, left);
    plan.push({ index: c.index, want });
    left -= want;
  }
  return plan;
}

/** A recorded deduction answered again: DEDUCTED, replayed, with what was granted and whether it was given back. */
function replayOf(rec: { quantity: number; remaining: number; compensated: boolean }, home: number): DeductResult {
  return {
    outcome: 'deducted',
    replayed: true,
    compensated: rec.compensated,
    remaining: rec.remaining,
    shard: home,
    granted: rec.quantity,
  };
}

function conflict(requestId: string, field: 'user_id' | 'quantity' | 'kind', recorded: string): DomainError {
  if (field === 'kind')
    return new DomainError(
      'failed_precondition',
      `request_id ${requestId} was already used by a ${recorded === 'reserve' ? 'Reserve' : 'Deduct'}; use a new request_id`,
    );
  return new DomainError(
    'failed_precondition',
    `request_id ${requestId} was already used with a different ${field} (recorded: ${JSON.stringify(recorded)}); use a new request_id`,
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
