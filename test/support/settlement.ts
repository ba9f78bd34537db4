// Helpers for the settlement tests: read the ledger straight from MySQL, wait for a coupon to settle.
import type { App } from '../../src/app/app.js';
import type { ReconcileResponse } from '../../src/gen/inventory/v1/inventory_pb.js';
import type { InventoryClient } from '../../src/client/grpc-client.js';

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
    'select kind, count(*) n, coalesce(sum(quantity),0) q from stock_ledger where coupon_id = ? group by kind', [couponId]);
  const by = (k: string) => rows.find((r) => r.kind === k);
  const [c] = await em.execute<{ settled_remaining: number | string; total_stock: number | string }[]>(
    'select settled_remaining, total_stock from coupon where id = ?', [couponId]);
  const anomalies = await em.execute<{ event_id: string; reason: string; quantity: number | string; refunded: number }[]>(
    'select event_id, reason, quantity, refunded from settlement_anomaly where coupon_id = ? order by id', [couponId]);
  const [dup] = await em.execute<{ n: number | string }[]>(
    'select count(*) n from (select 1 from stock_ledger where coupon_id = ? group by request_id, kind having count(*) > 1) d', [couponId]);
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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitFor<T>(what: string, probe: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 60_000, everyMs = 250): Promise<T> {
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
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last, (_, v) => (typeof v === 'bigint' ? Number(v) : v))} ${lastErr ? String(lastErr) : ''}`);
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
