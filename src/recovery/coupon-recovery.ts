// Coupon-wide recovery: rebuilds lost shards and brings live ones back within the bound, from one moment.
//
//   lease (MySQL) → pause every live shard (Redis, server time) → credit restocks MySQL has and Redis lacks →
//   read outbox + JetStream + ledger + coupon row (in that order) → plan (recovery-plan.ts) → lower live shards
//   → put back the missing shards' request records, user counts and claims → rebuild their hashes (paused) →
//   raise live shards → REPAIR ledger row → mark restocks applied → resume every shard → release the lease.
//
// While paused, every instance answers the coupon's Deduct/Compensate with UNAVAILABLE + retry-after: no unit
// moves, so what is read is what is there. The lease lives in MySQL because it guards against the very Redis
// data loss it repairs; the pause ends by itself if the holder dies, and a holder whose pause lapsed (read
// with 'extend' before anything is written) starts over rather than write from a stale reading.
import { randomUUID } from 'node:crypto';
import type { RecoveryRepository, RefusedDeduction } from '../db/recovery-repository.js';
import { notFound } from '../domain/errors.js';
import type {
  Coupon,
  CouponRecovery,
  CouponRepository,
  RecoveryOutcome,
  RecoveryReport,
  ShardRef,
  StockSignals,
  StockStore,
} from '../domain/ports.js';
import { allShards, claimShard, homeShard, shardRef, splitEvenly } from '../domain/routing.js';
import { PauseLost, type RedisRecoveryStore, type RestoredRecord } from '../redis/recovery-store.js';
import { eventId, moveCreditId, restockCreditId } from '../domain/ids.js';
import { CONFIRMED_HOLD, type SettlementEvent } from '../settlement/event.js';
import { InFlight } from '../settlement/reconcile/in-flight.js';
import type { LedgerStore } from '../settlement/settle/ledger-store.js';
import type { Logger } from '../util/logger.js';
import { type LiveShard, planRecovery } from './recovery-plan.js';

export interface CouponRecoveryOptions {
  instanceId: string;
  idempotencyWindowS: number;
  /** How long one pause (and the lease) lasts before it must be extended. */
  holdMs?: number;
}

export interface RecoveryStats {
  recoveries: number;
  rebuiltShards: number;
  loadedUnits: number;
  loweredUnits: number;
  restoredUnits: number;
  restoredRecords: number;
  busy: number;
  lastPausedMs: number;
}

export function newRecoveryStats(): RecoveryStats {
  return {
    recoveries: 0,
    rebuiltShards: 0,
    loadedUnits: 0,
    loweredUnits: 0,
    restoredUnits: 0,
    restoredRecords: 0,
    busy: 0,
    lastPausedMs: 0,
  };
}

const ATTEMPTS = 3;

export class CouponRecoveryService implements CouponRecovery {
  readonly stats = newRecoveryStats();
  private readonly holdMs: number;

  constructor(
    private readonly d: {
      repo: Pick<CouponRepository, 'find'>;
      recoveryRepo: RecoveryRepository;
      store: RedisRecoveryStore;
      stock: Pick<StockStore, 'pendingMoves'>;
      inFlight: InFlight;
      ledger: Pick<LedgerStore, 'reconcileView'>;
      /** Told when units went (back) on sale: instances drop their sold-out flags. */
      signals?: Pick<StockSignals, 'stockReturned'> | undefined;
      log?: Logger | undefined;
    },
    private readonly options: CouponRecoveryOptions,
  ) {
    this.holdMs = options.holdMs ?? 15_000;
  }

  async recover(couponId: string, reason: string, options: { restore?: boolean } = {}): Promise<RecoveryOutcome> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(couponId, reason, options.restore ?? false);
      } catch (err) {
        if (!(err instanceof PauseLost) || attempt >= ATTEMPTS) throw err;
        this.d.log?.warn({ couponId, err: err.message, attempt }, 'recovery: pause lapsed; starting over');
      }
    }
  }

  private async once(couponId: string, reason: string, restore: boolean): Promise<RecoveryOutcome> {
    const coupon = await this.d.repo.find(couponId);
    if (!coupon) throw notFound(`coupon ${couponId} does not exist`);
    const token = `${this.options.instanceId}:${randomUUID()}`;
    if (!(await this.d.recoveryRepo.acquireLease(couponId, token, this.holdMs + 5000))) {
      this.stats.busy++;
      return { kind: 'busy', retryAfterMs: 500 };
    }
    const started = Date.now();
    const shards = allShards(coupon);
    let completed = false;
    let keepAlive: ReturnType<typeof setInterval> | undefined;
    try {
      const paused = await Promise.all(shards.map((s) => this.d.store.pause(s, token, this.holdMs, 'new')));
      const busy = paused.find((p) => p.kind === 'busy');
      if (busy) {
        this.stats.busy++;
        return { kind: 'busy', retryAfterMs: Math.min(1000, busy.kind === 'busy' ? busy.waitMs : 500) };
      }
      const live: LiveShard[] = [];
      const missing: number[] = [];
      paused.forEach((p, i) => {
        if (p.kind === 'paused') live.push(p.shard);
        else missing.push(i);
      });

      // Outbox (Redis) → JetStream → ledger and coupon row (MySQL): an event moving along while it is read is
      // counted at least once and never both as settled and in flight.
      const snap = await this.d.inFlight.snapshot(coupon);
      const view = await this.d.ledger.reconcileView(couponId, InFlight.candidates(snap), false, true);
      if (!view) throw notFound(`coupon ${couponId} does not exist`);
      const flight = InFlight.figures(snap, view);
      const bound = view.coupon.settledRemaining - flight.net;
      const refusals = outstandingRefusals(await this.d.recoveryRepo.refusedDeductions(couponId), InFlight.candidates(snap), view.refused);

      // Restocks in that remaining whose shares Redis was not (all) credited with: credited on the live shards
      // now, recorded as applied on rebuilt ones (their stock comes from the remaining, which has them). A
      // restock committed after that read is not in the remaining and credits every shard itself later.
      const restocks = view.unappliedRestocks;
      const restockIds = restocks.map((r) => restockCreditId(r.requestId));
      for (const s of live) {
        const credits = restocks
          .map((r) => ({ id: restockCreditId(r.requestId), quantity: splitEvenly(r.quantity, coupon.shardCount)[s.index]! }))
          .filter((c) => c.quantity > 0);
        if (credits.length === 0) continue;
        const after = await this.d.store.adjust(shards[s.index]!, token, 0, credits);
        s.available = after.available;
      }

      // Units of a move that already landed at its target are counted there, not as the source's transit.
      for (const s of live) {
        for (const m of await this.d.stock.pendingMoves(shards[s.index]!)) {
          if (m.target < shards.length && (await this.d.store.landed(shards[m.target]!, moveCreditId(m.moveId)))) {
            s.inTransit = Math.max(0, s.inTransit - m.quantity);
          }
        }
      }

      // Moves out of a lost shard whose moves hash outlived its hash (a key evicted or deleted alone): its
      // transit units went with the hash, so they are either at the target already (the move landed) or in
      // no live shard, and then the plan gives them to the rebuilt shards. Either way the move must never land
      // again: its credit is recorded as applied on the target and the move is forgotten, or the sweeper would
      // credit the target with units the bound already placed (and its ack would drive the rebuilt source's
      // transit below zero).
      const orphaned: { source: number; moveId: string; target: number }[] = [];
      for (const i of missing) {
        for (const m of await this.d.stock.pendingMoves(shards[i]!)) {
          if (m.target < shards.length) orphaned.push({ source: i, moveId: m.moveId, target: m.target });
        }
      }
      const creditsOf = (index: number) =>
        orphaned.filter((o) => o.target === index).map((o) => ({ id: moveCreditId(o.moveId), quantity: 0 }));

      const plan = planRecovery({
        live,
        missing,
        bound,
        // Refused deductions not compensated in Redis stay in its net (MySQL never had them).
        netDeducted: view.coupon.totalStock - view.coupon.settledRemaining + flight.net + refusals.units,
        restore,
      });

      if (plan.unrecorded > 0)
        this.d.log?.error(
          { couponId, units: plan.unrecorded },
          'recovery: Redis counts deductions that MySQL neither settled nor has in flight (events lost on the way); their units stay off sale',
        );

      // Nothing is written before we know the pause held the whole time we were reading.
      for (const s of live) {
        const p = await this.d.store.pause(shards[s.index]!, token, this.holdMs, 'extend');
        if (p.kind !== 'paused') throw new PauseLost(`the pause on shard ${s.index} of coupon ${couponId} lapsed while it was read`);
      }

      // Restoring many records can outlast one hold: keep the pause and the lease alive until resume. A shard
      // is held from when it exists: the live ones now, each rebuilt one once its hash is written.
      const held = live.map((s) => shards[s.index]!);
      keepAlive = this.keepAlive(couponId, token, held);
      // The writes go in an order in which stopping after any of them (an error, or this instance dying) leaves
      // nothing on sale that should not be: a later recovery finishes the work. Units leave live shards first.
      // A lost shard's hash, which puts it back on sale, is written last for that shard: before it, its records,
      // user counts and claims are back and the moves out of it are settled, so a rebuilt shard is never found
      // without them (a retry would deduct again, a buyer would pass the limit, a forgotten move would land
      // twice). Until then the shard is missing, every call on it waits for the recovery, and a recovery after
      // an interrupted one plans it again from scratch (each restore is idempotent).
      let restoredRecords = 0;
      let restoredUsers = 0;
      let lowered = 0;
      let restored = 0;
      for (const s of live) {
        const credits = creditsOf(s.index);
        if (credits.length > 0) await this.d.store.adjust(shards[s.index]!, token, 0, credits);
      }
      for (const a of plan.adjust) {
        if (a.delta >= 0) continue;
        lowered += (await this.d.store.adjust(shards[a.index]!, token, a.delta, [])).applied;
      }
      for (const i of missing) {
        const moveIds = orphaned.filter((o) => o.source === i).map((o) => o.moveId);
        await this.d.store.forgetMoves(shards[i]!, moveIds);
      }
      if (missing.length > 0) {
        const restoredNow = await this.restoreRecords(coupon, new Set(missing), InFlight.candidates(snap), view.refused, refusals);
        restoredRecords = restoredNow.records;
        restoredUsers = restoredNow.users;
      }
      for (const r of plan.rebuild) {
        const credits = [...restockIds, ...creditsOf(r.index).map((c) => c.id)];
        await this.d.store.rebuild(shards[r.index]!, token, this.holdMs, r.available, r.net, credits);
        held.push(shards[r.index]!);
      }
      for (const a of plan.adjust) {
        if (a.delta < 0) continue;
        restored += (await this.d.store.adjust(shards[a.index]!, token, a.delta, [])).applied;
      }
      const loaded = plan.rebuild.reduce((sum, r) => sum + r.available, 0);
      const changed = loaded + lowered + restored;
      if (missing.length > 0 || lowered !== 0 || restored !== 0) {
        const why = [
          reason,
          missing.length > 0 ? `rebuilt shards ${missing.join(',')} with ${loaded} units` : '',
          lowered !== 0 ? `lowered a surplus of ${-lowered}` : '',
          restored !== 0 ? `restored ${restored} lost units` : '',
          plan.unrecorded > 0 ? `${plan.unrecorded} units sold by deductions MySQL never received kept off sale` : '',
          `bound ${bound}`,
        ]
          .filter(Boolean)
          .join('; ');
        await this.d.recoveryRepo.recordRepair(couponId, token, changed, why);
      }
      await this.d.recoveryRepo.markRestocksApplied(
        couponId,
        restocks.map((r) => r.requestId),
      );
      completed = true;

      const report = this.report(coupon, {
        missing,
        live,
        bound,
        started,
        plan,
        loaded,
        lowered,
        restored,
        restoredRecords,
        restoredUsers,
      });
      report.finishedRestocks = restocks.length;
      this.stats.recoveries++;
      this.stats.rebuiltShards += missing.length;
      this.stats.loadedUnits += loaded;
      this.stats.loweredUnits += -lowered;
      this.stats.restoredUnits += restored;
      this.stats.restoredRecords += restoredRecords;
      this.stats.lastPausedMs = report.pausedMs;
      if (loaded + restored > 0) this.d.signals?.stockReturned(couponId);
      this.d.log?.warn({ ...report, reason }, 'recovery: coupon brought back within its bound');
      return { kind: 'done', report };
    } finally {
      if (keepAlive) clearInterval(keepAlive);
      await Promise.all(shards.map((s) => this.d.store.resume(s, token).catch(() => false)));
      await this.d.recoveryRepo.releaseLease(couponId, token, completed);
    }
  }

  private keepAlive(couponId: string, token: string, held: ShardRef[]): ReturnType<typeof setInterval> {
    return setInterval(
      () => {
        void Promise.all([
          this.d.recoveryRepo.acquireLease(couponId, token, this.holdMs + 5000),
          ...held.map((s) => this.d.store.pause(s, token, this.holdMs, 'extend')),
        ]).then(
          ([, ...pauses]) => {
            if (pauses.some((p) => p.kind !== 'paused'))
              this.d.log?.error({ couponId }, 'recovery: a pause lapsed while the coupon was being rebuilt');
          },
          (err) => this.d.log?.warn({ couponId, err: (err as Error)?.message }, 'recovery: could not extend the pause'),
        );
      },
      Math.max(100, Math.floor(this.holdMs / 3)),
    );
  }

  /** Request records, user counts and claims of the rebuilt shards, from the ledger and the events in flight. */
  private async restoreRecords(
    coupon: Coupon,
    rebuilt: Set<number>,
    inFlight: ReturnType<typeof InFlight.candidates>,
    refused: Set<string>,
    refusals: Refusals,
  ) {
    const windowS = this.options.idempotencyWindowS;
    const since = Date.now() - windowS * 1000;
    const { deductions, compensated } = await this.d.recoveryRepo.settledSince(coupon.id, since);
    const byRequest = new Map<string, RestoredRecord & { shard: number }>();
    for (const d of deductions)
      byRequest.set(d.requestId, { ...d, compensated: compensated.has(d.requestId), hold: d.reason === CONFIRMED_HOLD });
    // Refused ones too, marked so: a retry replays instead of deducting again, a Compensate gives nothing back.
    for (const r of refusals.all) {
      if (r.occurredAt >= since && !byRequest.has(r.requestId)) byRequest.set(r.requestId, { ...r, refused: true });
    }
    for (const e of inFlight) {
      if (e.kind === 'D' && !refused.has(eventId(e)) && !byRequest.has(e.requestId)) {
        byRequest.set(e.requestId, {
          requestId: e.requestId,
          userId: e.userId,
          quantity: e.quantity,
          shard: e.shard,
          occurredAt: e.occurredAt,
          compensated: false,
          hold: e.reason === CONFIRMED_HOLD,
        });
      }
    }
    for (const e of inFlight) {
      const rec = e.kind === 'C' ? byRequest.get(e.requestId) : undefined;
      if (rec) rec.compensated = true;
    }
    const shards = allShards(coupon);
    let records = 0;
    const perShard = new Map<number, RestoredRecord[]>();
    for (const rec of byRequest.values()) {
      if (!rebuilt.has(rec.shard)) continue;
      const list = perShard.get(rec.shard) ?? [];
      list.push(rec);
      perShard.set(rec.shard, list);
    }
    for (const [index, list] of perShard) records += await this.d.store.restoreRecords(shards[index]!, list);

    let users = 0;
    if (coupon.perUserLimit > 0) {
      // The events in flight the ledger does not have yet (read with it, so none counts twice); a refused
      // deduction and its compensation never reach the ledger and are counted below, while outstanding.
      const held = await this.d.recoveryRepo.userHoldings(
        coupon.id,
        inFlight.filter((e) => !refused.has(eventId(e))),
      );
      // The buyer of a refused deduction holds its units (Redis counted them) until it is compensated.
      for (const r of refusals.outstanding) if (r.userId) held.set(r.userId, (held.get(r.userId) ?? 0) + r.quantity);
      const perUserShard = new Map<number, Map<string, number>>();
      for (const [user, n] of held) {
        const home = homeShard(coupon, '', user);
        if (!rebuilt.has(home)) continue;
        const m = perUserShard.get(home) ?? new Map<string, number>();
        m.set(user, n);
        perUserShard.set(home, m);
        users++;
      }
      // Every rebuilt shard, also one none of whose users holds anything: its surviving counts are replaced.
      for (const index of rebuilt) await this.d.store.restoreUserCounts(shards[index]!, perUserShard.get(index) ?? new Map());
      const claims = new Map<number, { requestId: string; value: string }[]>();
      const claim = (requestId: string, value: string) => {
        const at = claimShard(coupon, requestId);
        if (!rebuilt.has(at)) return;
        const list = claims.get(at) ?? [];
        list.push({ requestId, value });
        claims.set(at, list);
      };
      for (const rec of byRequest.values()) claim(rec.requestId, `${rec.userId}|${rec.quantity}`);
      // An open hold has no event and no ledger row yet, but its claim is what lets its Confirm be compensated
      // later and keeps its request id from another user: read from the live shards' holds. A confirmed hold
      // is a D event (in flight or settled) and is claimed above; the holds of a rebuilt shard went with it
      // and end without giving anything back (their units are in the rebuilt stock).
      const onRebuilt = (requestId: string) => rebuilt.has(claimShard(coupon, requestId));
      for (const [index, shard] of shards.entries()) {
        if (rebuilt.has(index)) continue;
        for (const h of await this.d.store.openHolds(shard, onRebuilt)) claim(h.requestId, `${h.userId}|${h.quantity}`);
      }
      for (const [index, list] of claims) await this.d.store.restoreClaims(shardRef(coupon, index), list);
    }
    return { records, users };
  }

  private report(
    coupon: Coupon,
    r: {
      missing: number[];
      live: LiveShard[];
      bound: number;
      started: number;
      plan?: ReturnType<typeof planRecovery>;
      loaded?: number;
      lowered?: number;
      restored?: number;
      restoredRecords?: number;
      restoredUsers?: number;
    },
  ): RecoveryReport {
    const heldBefore = r.plan?.heldBefore ?? r.live.reduce((s, l) => s + l.available + l.inTransit + (l.held ?? 0), 0);
    return {
      couponId: coupon.id,
      rebuiltShards: r.missing,
      loadedUnits: r.loaded ?? 0,
      loweredUnits: r.lowered ?? 0,
      restoredUnits: r.restored ?? 0,
      restoredRecords: r.restoredRecords ?? 0,
      restoredUsers: r.restoredUsers ?? 0,
      finishedRestocks: 0,
      bound: r.bound,
      heldBefore,
      heldAfter: heldBefore + (r.loaded ?? 0) + (r.lowered ?? 0) + (r.restored ?? 0),
      pausedMs: Date.now() - r.started,
    };
  }
}

interface Refusals {
  /** Every refused deduction MySQL records, compensated or not. */
  all: RefusedDeduction[];
  /** Those Redis still counts as sold: no compensation settled or on its way. */
  outstanding: RefusedDeduction[];
  units: number;
}

/**
 * The refused deductions as Redis counted them when the candidates were read. One refused after `refusedIds` was
 * read (its deduction is among the candidates but not in that set) is still counted in flight: left out here.
 */
function outstandingRefusals(rows: RefusedDeduction[], candidates: SettlementEvent[], refusedIds: Set<string>): Refusals {
  const pending = new Set<string>();
  const compensating = new Set<string>();
  for (const e of candidates) {
    if (e.kind === 'D' && !refusedIds.has(eventId(e))) pending.add(e.requestId);
    if (e.kind === 'C') compensating.add(e.requestId);
  }
  const all = rows.filter((r) => !pending.has(r.requestId));
  const outstanding = all.filter((r) => !r.compensated && !compensating.has(r.requestId));
  return { all, outstanding, units: outstanding.reduce((sum, r) => sum + r.quantity, 0) };
}
