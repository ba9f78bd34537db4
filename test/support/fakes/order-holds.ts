// OrderHolds and OrderRecords in memory, for the order coordinator's domain tests without the stack.
// FakeOrderHolds keeps stock per coupon and holds per (coupon, request id) with an expiry on the test's clock;
// FakeOrderRecords reproduces order-open-1.lua and order-move-1.lua step by step. `failNext` injects a
// failure (a crash or a lost connection) into the next call of one kind for one item.
import { type Hold, holdIdOf } from '../../../src/domain/holds.js';
import type {
  HoldEnd,
  HoldKey,
  HoldRefusal,
  HoldTake,
  OrderHolds,
  OrderMoveResult,
  OrderOpenResult,
  OrderRecord,
  OrderRecords,
  OrderState,
} from '../../../src/domain/ports.js';

interface FakeHold extends Hold {
  compensated: boolean;
}

type Step = 'reserve' | 'confirm' | 'release' | 'extend';

export class FakeOrderHolds implements OrderHolds {
  /** Units free to hold, per coupon. */
  readonly available = new Map<string, number>();
  /** Units confirmed (deducted) per coupon. */
  readonly deducted = new Map<string, number>();
  /** By hold id (`<coupon>/0/<request id>`: one shard per coupon here). */
  readonly holds = new Map<string, FakeHold>();
  readonly limits = new Map<string, number>();
  private readonly failures: { step: Step; requestId: string }[] = [];
  calls = 0;

  constructor(private readonly now: () => number) {}

  stock(couponId: string, units: number, perUserLimit = 0): void {
    this.available.set(couponId, units);
    this.deducted.set(couponId, 0);
    this.limits.set(couponId, perUserLimit);
  }

  failNext(step: Step, requestId: string): void {
    this.failures.push({ step, requestId });
  }

  /** Units held right now (not confirmed, released or expired) per coupon. */
  held(couponId: string): number {
    this.expire();
    let n = 0;
    for (const h of this.holds.values()) if (h.couponId === couponId && h.state === 'held') n += h.quantity;
    return n;
  }

  /** What holds' expiry does on its own: every hold past its expiry gives its units back, once. */
  expire(): void {
    for (const h of this.holds.values()) {
      if (h.state === 'held' && this.now() >= h.expiresAtMs) {
        h.state = 'expired';
        this.available.set(h.couponId, this.available.get(h.couponId)! + h.quantity);
      }
    }
  }

  private async step(step: Step, requestId: string): Promise<void> {
    this.calls++;
    await new Promise((r) => setImmediate(r));
    const i = this.failures.findIndex((f) => f.step === step && f.requestId === requestId);
    if (i >= 0) {
      this.failures.splice(i, 1);
      throw new Error(`injected ${step} failure for ${requestId}`);
    }
    this.expire();
  }

  private find(key: HoldKey): FakeHold | undefined {
    return this.holds.get(holdIdOf(key.couponId, 0, key.requestId));
  }

  async reserve(item: HoldKey & { quantity: number; ttlMs: number }): Promise<HoldTake> {
    await this.step('reserve', item.requestId);
    const h = this.find(item);
    if (h) return h.state === 'held' ? { kind: 'held', hold: { ...h } } : { kind: 'gone', end: h.state, hold: { ...h } };
    const available = this.available.get(item.couponId);
    if (available === undefined) throw new Error(`no coupon ${item.couponId}`);
    const limit = this.limits.get(item.couponId) ?? 0;
    if (limit > 0) {
      let mine = 0;
      for (const x of this.holds.values())
        if (x.couponId === item.couponId && x.userId === item.userId && (x.state === 'held' || x.state === 'confirmed') && !x.compensated)
          mine += x.quantity;
      if (mine + item.quantity > limit) return { kind: 'refused', reason: 'user_limit_exceeded' };
    }
    if (available < item.quantity) return { kind: 'refused', reason: (available === 0 ? 'sold_out' : 'insufficient') as HoldRefusal };
    this.available.set(item.couponId, available - item.quantity);
    const hold: FakeHold = {
      holdId: holdIdOf(item.couponId, 0, item.requestId),
      couponId: item.couponId,
      requestId: item.requestId,
      userId: item.userId,
      quantity: item.quantity,
      confirmed: 0,
      shard: 0,
      expiresAtMs: this.now() + item.ttlMs,
      state: 'held',
      compensated: false,
    };
    this.holds.set(hold.holdId, hold);
    return { kind: 'held', hold: { ...hold } };
  }

  async confirm(key: HoldKey): Promise<{ end: HoldEnd; hold?: Hold }> {
    await this.step('confirm', key.requestId);
    const h = this.find(key);
    if (!h) return { end: 'not_held' };
    if (h.state === 'held') {
      h.state = 'confirmed';
      h.confirmed = h.quantity;
      this.deducted.set(h.couponId, this.deducted.get(h.couponId)! + h.quantity);
    }
    return { end: h.state, hold: { ...h } };
  }

  async release(key: HoldKey): Promise<{ end: HoldEnd; hold?: Hold }> {
    await this.step('release', key.requestId);
    const h = this.find(key);
    if (!h) return { end: 'not_held' };
    if (h.state === 'held') {
      h.state = 'released';
      this.available.set(h.couponId, this.available.get(h.couponId)! + h.quantity);
    }
    return { end: h.state, hold: { ...h } };
  }

  async extend(key: HoldKey, ttlMs: number): Promise<{ end: HoldEnd | 'extended'; hold?: Hold }> {
    await this.step('extend', key.requestId);
    const h = this.find(key);
    if (!h) return { end: 'not_held' };
    if (h.state !== 'held') return { end: h.state, hold: { ...h } };
    h.expiresAtMs = this.now() + ttlMs;
    return { end: 'extended', hold: { ...h } };
  }

  async get(key: HoldKey): Promise<Hold | null> {
    this.expire();
    const h = this.find(key);
    return h ? { ...h } : null;
  }

  async compensate(key: HoldKey): Promise<'compensated' | 'already_compensated' | 'not_deducted'> {
    const h = this.find(key);
    if (h?.state !== 'confirmed') return 'not_deducted';
    if (h.compensated) return 'already_compensated';
    h.compensated = true;
    this.deducted.set(h.couponId, this.deducted.get(h.couponId)! - h.quantity);
    this.available.set(h.couponId, this.available.get(h.couponId)! + h.quantity);
    return 'compensated';
  }
}

export class FakeOrderRecords implements OrderRecords {
  readonly records = new Map<string, OrderRecord>();
  readonly dueAt = new Map<string, number>();

  async open(spec: Pick<OrderRecord, 'orderId' | 'kind' | 'userId' | 'items' | 'ttlMs'>, nowMs: number): Promise<OrderOpenResult> {
    await new Promise((r) => setImmediate(r));
    const r = this.records.get(spec.orderId);
    if (r) {
      if (r.kind !== spec.kind) return { kind: 'conflict', field: 'kind', recorded: r.kind };
      if (r.userId !== spec.userId) return { kind: 'conflict', field: 'user_id', recorded: r.userId };
      const items = JSON.stringify(spec.items);
      if (JSON.stringify(r.items) !== items) return { kind: 'conflict', field: 'items', recorded: JSON.stringify(r.items) };
      return { kind: 'found', record: structuredClone(r) };
    }
    const record: OrderRecord = { ...structuredClone(spec), state: 'pending', createdMs: nowMs };
    this.records.set(spec.orderId, record);
    return { kind: 'created', record: structuredClone(record) };
  }

  async move(
    orderId: string,
    from: OrderState[],
    to: OrderState,
    nowMs: number,
    opts: { notAfterMs?: number; set?: Partial<Pick<OrderRecord, 'expiresAtMs' | 'abort' | 'refused'>> } = {},
  ): Promise<OrderMoveResult> {
    await new Promise((r) => setImmediate(r));
    const r = this.records.get(orderId);
    if (!r) return { kind: 'missing' };
    if (!from.includes(r.state)) return { kind: 'other', record: structuredClone(r) };
    if ((opts.notAfterMs ?? 0) > 0 && nowMs >= opts.notAfterMs!) return { kind: 'late', record: structuredClone(r) };
    Object.assign(r, structuredClone(opts.set ?? {}), { state: to, decidedMs: nowMs });
    return { kind: 'moved', record: structuredClone(r) };
  }

  async read(orderId: string): Promise<OrderRecord | null> {
    const r = this.records.get(orderId);
    return r ? structuredClone(r) : null;
  }

  async schedule(orderId: string, atMs: number): Promise<void> {
    this.dueAt.set(orderId, atMs);
  }

  async unschedule(orderId: string): Promise<void> {
    this.dueAt.delete(orderId);
  }

  async due(nowMs: number, limit: number): Promise<string[]> {
    return [...this.dueAt]
      .filter(([, at]) => at <= nowMs)
      .slice(0, limit * 16)
      .map(([id]) => id);
  }
}
