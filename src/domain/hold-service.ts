// The Holds use case (port: holds.ts). Reserve takes units exactly as Deduct does — DeductService runs it with
// hold-reserve-7.lua in place of deduct-7.lua — so routing, claims, fallback moves, the sold-out fast path,
// per-user limits and input errors are the same. Confirm, Release and ExtendHold are one script each on the
// hold's shard; which of confirm, release and expiry wins is decided there, on the Redis server's clock.
import type { CouponCatalog } from './coupon-catalog.js';
import type { DeductService } from './deduct.js';
import { PausePatience } from './pause-patience.js';
import { DomainError, invalid } from './errors.js';
import {
  type ConfirmResult,
  type ExtendResult,
  type Hold,
  type Holds,
  holdIdOf,
  parseHoldId,
  type ReleaseResult,
  type ReserveInput,
  type ReserveResult,
} from './holds.js';
import type { Coupon, HoldRead, HoldRecord, HoldStore, ShardRef, StockChanges, StockSignals } from './ports.js';
import { shardRef } from './routing.js';
import type { ShardReloader } from './shard-reloader.js';
import type { SoldOutCache } from './sold-out-cache.js';
import * as v from './validate.js';

export interface HoldTtl {
  minMs: number;
  maxMs: number;
  defaultMs: number;
}

const STATES = { h: 'held', c: 'confirmed', r: 'released', x: 'expired' } as const;

export class HoldService implements Holds {
  constructor(
    private readonly deduct: DeductService,
    private readonly catalog: CouponCatalog,
    private readonly store: HoldStore,
    private readonly reloader: ShardReloader,
    private readonly soldOut: SoldOutCache,
    private readonly signals: StockSignals,
    private readonly ttl: HoldTtl,
    private readonly maxQuantity: number,
    private readonly changes?: StockChanges,
  ) {}

  async reserve(input: ReserveInput, signal?: AbortSignal): Promise<ReserveResult> {
    const ttlMs = this.ttlOf(input.ttlMs);
    // Validated here too (DeductService checks them again) so the pre-announcement below names a real shard.
    const couponId = v.couponId(input.couponId);
    const requestId = v.requestId(input.requestId);
    const quantity = input.quantity === 0n ? 1 : v.units('quantity', input.quantity, 1n, BigInt(this.maxQuantity));
    const r = await this.deduct.deduct({ couponId, requestId, userId: input.userId, quantity: input.quantity }, signal, {
      ttlMs,
      store: this.store,
    });
    if (r.outcome !== 'deducted') return { outcome: r.outcome, replayed: false, remaining: r.remaining, shard: r.shard };
    const coupon = await this.catalog.get(couponId);
    const ref = shardRef(coupon, r.shard);
    if (!r.replayed) {
      this.changes?.changed(couponId, false);
      return {
        outcome: 'held',
        replayed: false,
        remaining: r.remaining,
        shard: r.shard,
        hold: {
          holdId: holdIdOf(couponId, r.shard, requestId),
          couponId,
          requestId,
          userId: input.userId,
          quantity,
          confirmed: 0,
          shard: r.shard,
          expiresAtMs: r.expiresAtMs ?? 0,
          state: 'held',
        },
      };
    }
    const rec = await this.store.read(ref, requestId);
    return {
      outcome: 'held',
      replayed: true,
      remaining: r.remaining,
      shard: r.shard,
      hold: rec && rec !== 'missing' && rec !== 'deduction' ? holdOf(ref, requestId, rec) : undefined,
    };
  }

  async confirm(holdId: string, quantity?: bigint, signal?: AbortSignal): Promise<ConfirmResult> {
    const keep = quantity === undefined || quantity === 0n ? 0 : v.units('quantity', quantity, 1n, BigInt(this.maxQuantity));
    const { coupon, ref, requestId } = await this.locate(holdId);
    const r = await this.retrying(coupon, ref, signal, () => this.store.confirm(ref, requestId, keep));
    switch (r.kind) {
      case 'confirmed':
        if (r.released > 0) this.returned(coupon.id);
        else this.changes?.changed(coupon.id, false);
        return { outcome: 'confirmed', replayed: false, released: r.released, hold: await this.current(ref, requestId, r.record) };
      case 'replay':
        return { outcome: 'confirmed', replayed: true, released: r.released, hold: await this.current(ref, requestId, r.record) };
      case 'expired':
        if (r.released > 0) this.returned(coupon.id);
        return { outcome: 'expired', replayed: false, released: r.released, hold: await this.current(ref, requestId, r.record) };
      case 'released':
        return { outcome: 'released', replayed: false, released: 0, hold: await this.current(ref, requestId, r.record) };
      case 'not_found':
        return { outcome: 'not_found', replayed: false, released: 0 };
      case 'conflict':
        throw new DomainError(
          'failed_precondition',
          `hold ${holdId} was already confirmed with quantity ${r.recorded}; confirm it again with that quantity or none`,
        );
      case 'too_many':
        throw invalid('quantity', `must be at most the ${r.held} units held, got ${keep}`);
    }
  }

  async release(holdId: string, reason = '', signal?: AbortSignal): Promise<ReleaseResult> {
    v.text('reason', reason, v.REASON_MAX);
    const { coupon, ref, requestId } = await this.locate(holdId);
    const r = await this.retrying(coupon, ref, signal, () => this.store.release(ref, requestId));
    if ((r.kind === 'released' || r.kind === 'expired') && r.released > 0) this.returned(coupon.id);
    const hold = r.kind === 'not_found' ? undefined : await this.current(ref, requestId, r.record);
    switch (r.kind) {
      case 'released':
        return { outcome: 'released', released: r.released, hold };
      case 'expired':
        return { outcome: 'expired', released: 0, hold };
      case 'already_released':
        return { outcome: 'already_released', released: 0, hold };
      case 'confirmed':
        return { outcome: 'confirmed', released: 0, hold };
      case 'not_found':
        return { outcome: 'not_found', released: 0 };
    }
  }

  async extend(holdId: string, ttlMs: number, signal?: AbortSignal): Promise<ExtendResult> {
    const ttl = this.ttlOf(ttlMs);
    const { coupon, ref, requestId } = await this.locate(holdId);
    const r = await this.retrying(coupon, ref, signal, () => this.store.extend(ref, requestId, ttl));
    if (r.kind === 'not_found') return { outcome: 'not_found' };
    return { outcome: r.kind, hold: await this.current(ref, requestId, r.record) };
  }

  async get(holdId: string): Promise<Hold | null> {
    const { ref, requestId } = await this.locate(holdId);
    return (await this.current(ref, requestId)) ?? null;
  }

  private ttlOf(ttlMs: number): number {
    if (ttlMs === 0) return this.ttl.defaultMs;
    if (!Number.isInteger(ttlMs) || ttlMs < this.ttl.minMs || ttlMs > this.ttl.maxMs)
      throw invalid('ttl_ms', `must be 0 (the default, ${this.ttl.defaultMs}) or in ${this.ttl.minMs}..${this.ttl.maxMs}, got ${ttlMs}`);
    return ttlMs;
  }

  private async locate(holdId: string): Promise<{ coupon: Coupon; ref: ShardRef; requestId: string }> {
    const { couponId, shard, requestId } = parseHoldId(holdId);
    v.couponId(couponId);
    v.requestId(requestId);
    const coupon = await this.catalog.get(couponId);
    if (shard >= coupon.shardCount) throw invalid('hold_id', `names shard ${shard}, but coupon ${couponId} has ${coupon.shardCount}`);
    return { coupon, ref: shardRef(coupon, shard), requestId };
  }

  /** A script call that may find the shard lost (reload, then again) or paused for a recovery (wait a little). */
  private async retrying<R extends { kind: string }>(
    coupon: Coupon,
    ref: ShardRef,
    signal: AbortSignal | undefined,
    run: () => Promise<R>,
  ): Promise<Exclude<R, { kind: 'missing' | 'paused' }>> {
    let patience: PausePatience | undefined;
    for (let attempt = 0; attempt < 40; attempt++) {
      if (signal?.aborted)
        throw new DomainError('deadline_exceeded', 'the call was cancelled or its deadline passed before it could finish');
      const r = await run();
      if (r.kind === 'missing') {
        await this.reloader.reload(coupon, ref.index);
        continue;
      }
      if (r.kind === 'paused') {
        patience ??= new PausePatience(coupon.id);
        await patience.wait((r as unknown as { waitMs: number }).waitMs);
        continue;
      }
      return r as Exclude<R, { kind: 'missing' | 'paused' }>;
    }
    throw new DomainError('unavailable', `shard ${ref.index} of coupon ${coupon.id} could not be reloaded; retry`);
  }

  /** The hold as it stands: `known`, the record the store read with the call's reply, or a read now. */
  private async current(ref: ShardRef, requestId: string, known?: HoldRead): Promise<Hold | undefined> {
    const rec = known !== undefined ? known : await this.store.read(ref, requestId);
    // A hold on a shard that lost its data is lost with it (docs/holds.md): not found.
    return rec && rec !== 'missing' && rec !== 'deduction' ? holdOf(ref, requestId, rec) : undefined;
  }

  private returned(couponId: string): void {
    this.soldOut.clear(couponId);
    this.signals.stockReturned(couponId);
    this.changes?.changed(couponId, true);
  }
}

export function holdOf(ref: ShardRef, requestId: string, rec: HoldRecord): Hold {
  return {
    holdId: holdIdOf(ref.couponId, ref.index, requestId),
    couponId: ref.couponId,
    requestId,
    userId: rec.userId,
    quantity: rec.quantity,
    confirmed: rec.confirmed,
    shard: ref.index,
    expiresAtMs: rec.expiresAtMs,
    state: STATES[rec.state],
  };
}
