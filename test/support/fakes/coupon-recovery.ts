// CouponRecovery over the fakes, following src/recovery/coupon-recovery.ts step by step: one holder per coupon
// (the lease), pause every live shard, credit restocks the repository has and the shards lack, read, plan with
// the real planRecovery, rebuild missing shards paused (with their request records, user counts and claims),
// adjust live shards, resume every shard with a new epoch. With nothing settled, the event log is what is "in
// flight": bound = total − net deducted.
import { notFound } from '../../../src/domain/errors.js';
import type { CouponRecovery, RecoveryOutcome } from '../../../src/domain/ports.js';
import { allShards, claimShard, homeShard, splitEvenly } from '../../../src/domain/routing.js';
import { type LiveShard, planRecovery } from '../../../src/recovery/recovery-plan.js';
import type { FakeCouponRepository } from './coupon-repository.js';
import type { FakeStockStore } from './stock-store.js';

const HOLD_MS = 15_000;
const tick = () => new Promise<void>((r) => setImmediate(r));

export class FakeCouponRecovery implements CouponRecovery {
  private readonly leases = new Set<string>();
  private n = 0;
  recoveries = 0;
  readonly reasons: string[] = [];

  constructor(
    private readonly repo: FakeCouponRepository,
    private readonly store: FakeStockStore,
  ) {}

  async recover(couponId: string, reason: string, options: { restore?: boolean } = {}): Promise<RecoveryOutcome> {
    const coupon = await this.repo.find(couponId);
    if (!coupon) throw notFound(`coupon ${couponId} does not exist`);
    if (this.leases.has(couponId)) return { kind: 'busy', retryAfterMs: 500 };
    this.leases.add(couponId);
    this.reasons.push(reason);
    const token = `fake:${++this.n}`;
    const started = Date.now();
    const shards = allShards(coupon);
    try {
      const live: LiveShard[] = [];
      const missing: number[] = [];
      for (const ref of shards) {
        const s = this.store.shard(ref);
        if (!s) {
          missing.push(ref.index);
          continue;
        }
        s.pz = Date.now() + HOLD_MS;
        s.pt = token;
        live.push({ index: ref.index, available: s.avail, inTransit: s.transit, net: s.net });
      }
      await tick();

      if (!coupon.preheated) {
        const split = splitEvenly(coupon.initialStock, coupon.shardCount);
        for (const i of missing) await this.store.initShard(shards[i]!, split[i]!);
        return { kind: 'done', report: this.report(couponId, missing, live, coupon.initialStock, started, 0, 0) };
      }

      const restocks = (await this.repo.unappliedRestocks(0)).filter((r) => r.couponId === couponId);
      const restockIds = restocks.map((r) => `R:${r.requestId}`);
      for (const l of live) {
        const st = this.store.state(shards[l.index]!);
        for (const r of restocks) {
          const share = splitEvenly(r.quantity, coupon.shardCount)[l.index]!;
          if (share === 0 || st.credits.has(`R:${r.requestId}`)) continue;
          st.shard!.avail += share;
          st.credits.set(`R:${r.requestId}`, Date.now());
        }
        l.available = st.shard!.avail;
      }
      for (const l of live) {
        for (const m of await this.store.pendingMoves(shards[l.index]!)) {
          const target = shards[m.target];
          if (target && this.store.tags.get(target.tag)?.credits.has(`M:${m.moveId}`)) l.inTransit = Math.max(0, l.inTransit - m.quantity);
        }
      }
      let netDeducted = 0;
      for (const e of this.store.events) if (e.couponId === couponId) netDeducted += e.kind === 'D' ? e.quantity : -e.quantity;
      const bound = coupon.settledRemaining - netDeducted;
      const plan = planRecovery({ live, missing, bound, netDeducted, restore: options.restore ?? false });
      await tick();

      for (const r of plan.rebuild) {
        const st = this.store.state(shards[r.index]!);
        st.shard = { avail: r.available, transit: 0, net: r.net, pz: Date.now() + HOLD_MS, pt: token, ep: token };
        for (const id of restockIds) st.credits.set(id, Date.now());
      }
      if (missing.length > 0) this.restoreRecords(couponId, new Set(missing));
      let changed = 0;
      for (const a of plan.adjust) {
        const s = this.store.shard(shards[a.index]!)!;
        const applied = a.delta < 0 && -a.delta > s.avail ? -s.avail : a.delta;
        s.avail += applied;
        changed += applied;
      }
      for (const r of restocks) await this.repo.markRestockApplied(couponId, r.requestId);
      this.recoveries++;
      const loaded = plan.rebuild.reduce((sum, r) => sum + r.available, 0);
      return { kind: 'done', report: this.report(couponId, missing, live, bound, started, loaded, changed) };
    } finally {
      for (const ref of shards) {
        const s = this.store.shard(ref);
        if (s?.pt !== token) continue;
        delete s.pz;
        delete s.pt;
        s.ep = token;
      }
      this.leases.delete(couponId);
    }
  }

  /** Request records, user counts and claims of the rebuilt shards, from the event log (record-restore-3.lua). */
  private restoreRecords(couponId: string, rebuilt: Set<number>): void {
    const coupon = this.repo.coupons.get(couponId)!;
    const shards = allShards(coupon);
    const compensated = new Set(this.store.events.filter((e) => e.couponId === couponId && e.kind === 'C').map((e) => e.requestId));
    const held = new Map<string, number>();
    for (const e of this.store.events) {
      if (e.couponId !== couponId) continue;
      if (e.userId) held.set(e.userId, (held.get(e.userId) ?? 0) + (e.kind === 'D' ? e.quantity : -e.quantity));
      if (e.kind !== 'D') continue;
      if (rebuilt.has(e.shard)) {
        const st = this.store.state(shards[e.shard]!);
        if (!st.requests.has(e.requestId))
          st.requests.set(e.requestId, { u: e.userId, q: e.quantity, r: 0, s: e.shard, t: e.at, c: compensated.has(e.requestId) });
      }
      const at = claimShard(coupon, e.requestId);
      if (coupon.perUserLimit > 0 && rebuilt.has(at)) {
        const claims = this.store.state(shards[at]!).claims;
        if (!claims.has(e.requestId)) claims.set(e.requestId, `${e.userId}|${e.quantity}`);
      }
    }
    if (coupon.perUserLimit > 0) {
      for (const [user, n] of held) {
        const home = homeShard(coupon, '', user);
        if (rebuilt.has(home)) this.store.state(shards[home]!).users.set(user, Math.max(0, n));
      }
    }
  }

  private report(couponId: string, missing: number[], live: LiveShard[], bound: number, started: number, loaded: number, changed: number) {
    const heldBefore = live.reduce((s, l) => s + l.available + l.inTransit, 0);
    return {
      couponId,
      rebuiltShards: missing,
      loadedUnits: loaded,
      loweredUnits: Math.min(0, changed),
      restoredUnits: Math.max(0, changed),
      restoredRecords: 0,
      restoredUsers: 0,
      finishedRestocks: 0,
      bound,
      heldBefore,
      heldAfter: heldBefore + loaded + changed,
      pausedMs: Date.now() - started,
    };
  }
}
