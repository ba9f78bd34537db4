// Helpers for the settlement tests: read the ledger straight from MySQL, wait for a coupon to settle.
import { expect } from 'vitest';
import type { App } from '../../src/app/app.js';
import { shardRef } from '../../src/domain/routing.js';
import { CompensateOutcome, DeductOutcome, type DeductResponse, type ReconcileResponse } from '../../src/gen/inventory/v1/inventory_pb.js';
import type { InventoryClient } from '../../src/client/grpc-client.js';
import type { RedisRefusalStore } from '../../src/settlement/settle/refusal-store.js';
import { uniqueId, type TestApp } from './harness.js';

export interface LedgerFigures {
  deductRows: number;
  deductUnits: number;
  compensateRows: number;
  compensateUnits: number;
  remaining: number;
  total: number;
  anomalies: { eventId: string; reason: string; quantity: number; refunded: boolean }[];
  /** Ledger rows per (request, kind) > 1: must never happen (the unique key). */
  duplicates: number;
}

export async function ledgerFigures(app: App, couponId: string): Promise<LedgerFigures> {
  const em = app.orm.em.fork();
  const rows = await em.execute<{ kind: string; n: number | string; q: number | string }[]>(
    'select kind, count(*) n, coalesce(sum(quantity),0) q from stock_ledger where coupon_id = ? group by kind',
    [couponId],
  );
  const by = (k: string) => rows.find((r) => r.kind === k);
  const [c] = await em.execute<{ settled_remaining: number | string; total_stock: number | string }[]>(
    'select settled_remaining, total_stock from coupon where id = ?',
    [couponId],
  );
  const anomalies = await em.execute<{ event_id: string; reason: string; quantity: number | string; refunded: number }[]>(
    'select event_id, reason, quantity, refunded from settlement_anomaly where coupon_id = ? order by id',
    [couponId],
  );
  const [dup] = await em.execute<{ n: number | string }[]>(
    'select count(*) n from (select 1 from stock_ledger where coupon_id = ? group by request_id, kind having count(*) > 1) d',
    [couponId],
  );
  return {
    deductRows: Number(by('DEDUCT')?.n ?? 0),
    deductUnits: Number(by('DEDUCT')?.q ?? 0),
    compensateRows: Number(by('COMPENSATE')?.n ?? 0),
    compensateUnits: Number(by('COMPENSATE')?.q ?? 0),
    remaining: Number(c?.settled_remaining),
    total: Number(c?.total_stock),
    anomalies: anomalies.map((a) => ({ eventId: a.event_id, reason: a.reason, quantity: Number(a.quantity), refunded: !!a.refunded })),
    duplicates: Number(dup?.n ?? 0),
  };
}

/** Expects the ledger to hold exactly what a load was answered: every deduction and compensation once, no anomaly. */
export async function expectLedgerOfLoad(app: App, couponId: string, total: number, load: SaleLoad): Promise<LedgerFigures> {
  const f = await ledgerFigures(app, couponId);
  const u = load.units;
  expect(f.duplicates).toBe(0);
  expect(f.anomalies).toEqual([]);
  expect(f.deductRows).toBe(load.deducted.size);
  expect(f.deductUnits).toBe(u.deducted);
  expect(f.compensateRows).toBe(load.compensated.size);
  expect(f.compensateUnits).toBe(u.compensated);
  expect(f.remaining).toBe(total - u.deducted + u.compensated);
  return f;
}

/** Creates a one-shard coupon (its id starts with `idPrefix`) whose Redis shard holds `units` MySQL does not have
 * (as after writes lost in a failover), so that settlement refuses the deduction that sells them. */
export async function couponAheadOfMysql(t: TestApp, idPrefix: string, units: number): Promise<string> {
  const couponId = uniqueId(idPrefix);
  await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 1 });
  await t.app.orm.em.fork().execute('update coupon set settled_remaining = 0 where id = ?', [couponId]);
  await t.app.redis.hset(t.app.store.keys(shardRef((await t.app.repo.find(couponId))!, 0)).shard, 'avail', units);
  return couponId;
}

/** What a refusal test ends on: how many units Redis showed (`rec`), the next Deduct's answer (`next`), and how
 * many deductions settlement refused. */
export async function afterRefusal(app: App, couponId: string, rec: ReconcileResponse, next: DeductResponse) {
  const f = await ledgerFigures(app, couponId);
  return {
    redisAvailable: rec.redisAvailable,
    next: DeductOutcome[next.outcome],
    refusedDeductions: f.anomalies.filter((x) => x.reason === 'insufficient_settled_remaining').length,
  };
}

/** The settler's refusal store, for tests that make a refusal mark fail, wait or miss. */
export function refusalStore(app: App): RedisRefusalStore {
  return (app.settlement as unknown as { d: { refusals: RedisRefusalStore } }).d.refusals;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 60_000,
  everyMs = 250,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastErr: unknown;
  while (Date.now() < until) {
    try {
      last = await probe();
      if (done(last)) return last;
    } catch (err) {
      lastErr = err;
    }
    await sleep(everyMs);
  }
  throw new Error(
    `timed out waiting for ${what}; last: ${JSON.stringify(last, (_, v) => (typeof v === 'bigint' ? Number(v) : v))} ${lastErr ? String(lastErr) : ''}`,
  );
}

/** Waits until nothing of the coupon is in flight and Reconcile says consistent. */
export function settled(client: InventoryClient, couponId: string, timeoutMs = 60_000): Promise<ReconcileResponse> {
  return waitFor(
    `coupon ${couponId} to settle`,
    () => client.reconcile({ couponId }),
    (r) => r.consistent && r.outboxEvents === 0n && r.jetstreamPending === 0n && r.inFlightNet === 0n,
    timeoutMs,
  );
}

/** Waits until nothing of the coupon is in an outbox or in JetStream (and `also` holds), then reads Reconcile once
 * more with nothing moving: the read that saw the pipeline drain may have seen its last events settle between its
 * two reads of MySQL, which Reconcile reports as a (safe-side) negative drift. */
export async function drainedReconcile(
  client: InventoryClient,
  couponId: string,
  also: (r: ReconcileResponse) => boolean = () => true,
  timeoutMs = 60_000,
): Promise<ReconcileResponse> {
  await waitFor(
    `coupon ${couponId}'s events to drain`,
    () => client.reconcile({ couponId }),
    (r) => r.jetstreamPending === 0n && r.outboxEvents === 0n && also(r),
    timeoutMs,
  );
  return client.reconcile({ couponId });
}

/** Deducts (and compensates every third success) until stopped, remembering every outcome it is sure of and
 * every call whose outcome it could not learn (the server died, the call timed out). */
export class SaleLoad {
  readonly deducted = new Map<string, number>();
  readonly compensated = new Set<string>();
  readonly unknownDeducts = new Map<string, number>();
  readonly unknownCompensates = new Set<string>();
  errors = 0;
  private stopped = false;
  private next = 0;
  private workers: Promise<void>[] = [];

  constructor(
    private readonly client: () => InventoryClient,
    private readonly couponId: string,
    private readonly prefix: string,
    private readonly concurrency = 16,
    private readonly pauseMs = 0,
  ) {}

  get units(): { deducted: number; compensated: number } {
    let deducted = 0;
    let compensated = 0;
    for (const [rid, q] of this.deducted) {
      deducted += q;
      if (this.compensated.has(rid)) compensated += q;
    }
    return { deducted, compensated };
  }

  start(): this {
    this.workers = Array.from({ length: this.concurrency }, () => this.work());
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.workers);
  }

  /** Like a careful client: a call that failed is retried with the same request id until it is answered
   * (or the load stops, and its outcome stays unknown). */
  private async retrying<T>(call: () => Promise<T>): Promise<T | undefined> {
    for (;;) {
      try {
        return await call();
      } catch {
        this.errors++;
        if (this.stopped) return undefined;
        await sleep(100);
      }
    }
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      const i = this.next++;
      const rid = `${this.prefix}-${i}`;
      const q = 1 + (i % 3);
      const r = await this.retrying(() =>
        this.client().deduct({ couponId: this.couponId, requestId: rid, quantity: BigInt(q) }, { deadlineMs: 3000 }),
      );
      if (!r) {
        this.unknownDeducts.set(rid, q);
        return;
      }
      if (r.outcome === DeductOutcome.DEDUCTED) {
        this.deducted.set(rid, q);
        if (i % 3 === 0) {
          const c = await this.retrying(() =>
            this.client().compensate({ couponId: this.couponId, requestId: rid, reason: 'cancelled' }, { deadlineMs: 3000 }),
          );
          if (!c) this.unknownCompensates.add(rid);
          else if (c.outcome === CompensateOutcome.COMPENSATED || c.outcome === CompensateOutcome.ALREADY_COMPENSATED)
            this.compensated.add(rid);
        }
      }
      if (this.pauseMs) await sleep(this.pauseMs);
    }
  }

  /** Asks again for every call whose outcome was lost (same request ids: the service answers replays truthfully). */
  async resolveUnknown(): Promise<void> {
    for (const [rid, q] of this.unknownDeducts) {
      const r = await this.client().deduct({ couponId: this.couponId, requestId: rid, quantity: BigInt(q) });
      if (r.outcome === DeductOutcome.DEDUCTED) this.deducted.set(rid, q);
    }
    this.unknownDeducts.clear();
    for (const rid of this.unknownCompensates) {
      const c = await this.client().compensate({ couponId: this.couponId, requestId: rid, reason: 'cancelled' });
      if (c.outcome === CompensateOutcome.COMPENSATED || c.outcome === CompensateOutcome.ALREADY_COMPENSATED) this.compensated.add(rid);
    }
    this.unknownCompensates.clear();
  }
}
