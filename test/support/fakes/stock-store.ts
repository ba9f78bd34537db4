// StockStore in memory, for domain tests without the stack. Each method reproduces its Lua script step by
// step (the same checks in the same order, the same answers), so a use case behaves over it as over Redis:
//   initShard → shard-init-2.lua, deduct → deduct-7.lua, compensate → compensate-6.lua,
//   moveOut → move-out-2.lua, ackMove → move-ack-2.lua, credit → credit-2.lua.
// Everything under one hash tag lives in one TagState, so `lose` drops what a lost Redis node takes with it
// (shard hash, request records, user counts, claims, credits, moves). The event log stands for the outbox
// once relayed: it survives a loss, as the events would have reached JetStream.
import type {
  CompensateScriptResult,
  Credit,
  CreditResult,
  DeductScriptInput,
  DeductScriptResult,
  PendingMove,
  ShardLevel,
  ShardRef,
  StockStore,
} from '../../../src/domain/ports.js';

export interface FakeShard {
  avail: number;
  transit: number;
  net: number;
  /** Paused until (ms) and by whom (shard-pause-1.lua). */
  pz?: number;
  pt?: string;
  /** Recovery epoch: set by every resume (shard-resume-1.lua) and rebuild. */
  ep?: string;
}

export interface FakeRecord {
  u: string;
  q: number;
  r: number;
  s: number;
  t: number;
  c?: boolean;
  /** Refused by settlement (compensate gives nothing back for it). */
  x?: boolean;
}

export interface TagState {
  shard?: FakeShard;
  requests: Map<string, FakeRecord>;
  users: Map<string, number>;
  claims: Map<string, string>;
  credits: Map<string, number>;
  moves: Map<string, { target: number; quantity: number; startedMs: number }>;
}

export interface FakeEvent {
  kind: 'D' | 'C';
  couponId: string;
  requestId: string;
  userId: string;
  quantity: number;
  shard: number;
  at: number;
  reason?: string;
}

export class FakeStockStore implements StockStore {
  readonly tags = new Map<string, TagState>();
  readonly events: FakeEvent[] = [];
  /** Calls per method, for tests that count round trips. */
  readonly calls: Record<string, number> = {};
  /** Runs before every call (a test can make a shard vanish or pause mid-flight). */
  beforeCall: ((method: string, shard: ShardRef) => void | Promise<void>) | undefined;

  state(shard: ShardRef): TagState {
    let s = this.tags.get(shard.tag);
    if (!s) {
      s = { requests: new Map(), users: new Map(), claims: new Map(), credits: new Map(), moves: new Map() };
      this.tags.set(shard.tag, s);
    }
    return s;
  }

  shard(shard: ShardRef): FakeShard | undefined {
    return this.tags.get(shard.tag)?.shard;
  }

  /** What a lost Redis node takes with it: everything under the shard's hash tag. */
  lose(shard: ShardRef): void {
    this.tags.delete(shard.tag);
  }

  private async enter(method: string, shard: ShardRef): Promise<void> {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
    await this.beforeCall?.(method, shard);
  }

  /** Milliseconds the shard stays paused (0: not paused), as the scripts compute it from server time. */
  private pausedFor(s: FakeShard): number {
    return s.pz === undefined ? 0 : Math.max(0, s.pz - Date.now());
  }

  async initShard(shard: ShardRef, available: number, net = 0): Promise<boolean> {
    await this.enter('initShard', shard);
    const st = this.state(shard);
    if (st.shard) return false;
    st.shard = { avail: available, transit: 0, net };
    return true;
  }

  async deduct(shard: ShardRef, input: DeductScriptInput, credits: Credit[], creditEpoch = ''): Promise<DeductScriptResult> {
    await this.enter('deduct', shard);
    const st = this.state(shard);
    const s = st.shard;
    if (!s) return { kind: 'missing' };
    const wait = this.pausedFor(s);
    if (wait > 0) return { kind: 'paused', waitMs: wait };
    const now = Date.now();
    if (credits.length > 0) {
      if ((s.ep ?? '') !== creditEpoch) return { kind: 'stale_credits' };
      for (const c of credits) {
        if (st.credits.has(c.id)) continue;
        s.avail += c.quantity;
        st.credits.set(c.id, now);
      }
    }
    const rec = st.requests.get(input.requestId);
    if (rec) {
      if (rec.u !== input.userId) return { kind: 'conflict', field: 'user_id', recorded: rec.u };
      if (rec.q !== input.quantity) return { kind: 'conflict', field: 'quantity', recorded: String(rec.q) };
      return { kind: 'replay', remaining: rec.r, compensated: rec.c === true };
    }
    const userKey = input.userId || '-';
    if (input.perUserLimit > 0) {
      const held = st.users.get(userKey) ?? 0;
      if (held + input.quantity > input.perUserLimit) return { kind: 'user_limit', held };
    }
    if (s.avail < input.quantity) return { kind: 'short', available: s.avail, epoch: s.ep ?? '' };
    s.avail -= input.quantity;
    s.net += input.quantity;
    if (input.perUserLimit > 0) st.users.set(userKey, (st.users.get(userKey) ?? 0) + input.quantity);
    st.requests.set(input.requestId, { u: input.userId, q: input.quantity, r: s.avail, s: shard.index, t: now });
    this.events.push({
      kind: 'D',
      couponId: shard.couponId,
      requestId: input.requestId,
      userId: input.userId,
      quantity: input.quantity,
      shard: shard.index,
      at: now,
    });
    return { kind: 'deducted', remaining: s.avail };
  }

  async compensate(shard: ShardRef, requestId: string, reason: string, limitedUserId: string | undefined): Promise<CompensateScriptResult> {
    await this.enter('compensate', shard);
    const st = this.state(shard);
    const s = st.shard;
    if (!s) return { kind: 'missing' };
    const wait = this.pausedFor(s);
    if (wait > 0) return { kind: 'paused', waitMs: wait };
    const rec = st.requests.get(requestId);
    if (!rec) return { kind: 'not_deducted' };
    if (rec.c) return { kind: 'already', remaining: s.avail };
    if (!rec.x) s.avail += rec.q;
    s.net -= rec.q;
    if (limitedUserId !== undefined) {
      const key = limitedUserId || '-';
      st.users.set(key, Math.max(0, (st.users.get(key) ?? 0) - rec.q));
    }
    rec.c = true;
    this.events.push({
      kind: 'C',
      couponId: shard.couponId,
      requestId,
      userId: rec.u,
      quantity: rec.q,
      shard: shard.index,
      at: Date.now(),
      reason,
    });
    return { kind: 'compensated', remaining: s.avail, quantity: rec.q };
  }

  async claimRequest(shard: ShardRef, requestId: string, value: string): Promise<string | null | 'missing'> {
    await this.enter('claimRequest', shard);
    // claim-4.lua: refused while the shard hash is gone (its claims went with it).
    if (!this.tags.get(shard.tag)?.shard) return 'missing';
    const st = this.state(shard);
    const prior = st.claims.get(requestId);
    if (prior !== undefined) return prior;
    st.claims.set(requestId, value);
    return null;
  }

  async keepClaim(shard: ShardRef, requestId: string, value: string): Promise<void> {
    await this.enter('keepClaim', shard);
    const st = this.state(shard);
    if (!st.claims.has(requestId)) st.claims.set(requestId, value);
  }

  async readClaim(shard: ShardRef, requestId: string): Promise<string | null | 'missing'> {
    await this.enter('readClaim', shard);
    // claim-read-4.lua
    if (!this.tags.get(shard.tag)?.shard) return 'missing';
    return this.tags.get(shard.tag)?.claims.get(requestId) ?? null;
  }

  async readRequest(shard: ShardRef, requestId: string) {
    await this.enter('readRequest', shard);
    const rec = this.tags.get(shard.tag)?.requests.get(requestId);
    if (!rec) return null;
    return { userId: rec.u, quantity: rec.q, remaining: rec.r, compensated: rec.c === true, reserve: false };
  }

  async probe(shards: ShardRef[]): Promise<ShardLevel[]> {
    for (const s of shards) await this.enter('probe', s);
    return shards.map((ref) => {
      const s = this.shard(ref);
      return { index: ref.index, available: s ? s.avail : null, inTransit: s?.transit ?? 0, net: s?.net ?? 0 };
    });
  }

  async moveOut(source: ShardRef, moveId: string, target: number, want: number): Promise<number | 'missing' | 'paused'> {
    await this.enter('moveOut', source);
    const st = this.state(source);
    const existing = st.moves.get(moveId);
    if (existing) return existing.quantity;
    const s = st.shard;
    if (!s) return 'missing';
    if (this.pausedFor(s) > 0) return 'paused';
    const take = Math.min(s.avail, want);
    if (take <= 0) return 0;
    s.avail -= take;
    s.transit += take;
    st.moves.set(moveId, { target, quantity: take, startedMs: Date.now() });
    return take;
  }

  async ackMove(source: ShardRef, moveId: string): Promise<boolean> {
    await this.enter('ackMove', source);
    const st = this.state(source);
    const m = st.moves.get(moveId);
    if (!m) return false;
    const s = st.shard;
    if (!s) return false;
    if (this.pausedFor(s) > 0) return false;
    s.transit -= m.quantity;
    st.moves.delete(moveId);
    return true;
  }

  async credit(shard: ShardRef, creditId: string, quantity: number, epoch?: string): Promise<CreditResult> {
    await this.enter('credit', shard);
    const st = this.state(shard);
    const s = st.shard;
    if (!s) return 'missing';
    if (this.pausedFor(s) > 0) return 'paused';
    if (epoch !== undefined && (s.ep ?? '') !== epoch) return 'stale';
    if (st.credits.has(creditId)) return 'already';
    s.avail += quantity;
    st.credits.set(creditId, Date.now());
    return 'applied';
  }

  async epochs(shards: ShardRef[]): Promise<(string | null)[]> {
    for (const shard of shards) await this.enter('epochs', shard);
    return shards.map((shard) => {
      const s = this.state(shard).shard;
      return s ? (s.ep ?? '') : null;
    });
  }

  async pendingMoves(shard: ShardRef): Promise<PendingMove[]> {
    await this.enter('pendingMoves', shard);
    const moves = this.tags.get(shard.tag)?.moves ?? new Map();
    return [...moves].map(([moveId, m]) => ({ moveId, ...m }));
  }
}
