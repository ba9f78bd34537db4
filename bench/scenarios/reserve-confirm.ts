// Reserve + Confirm against Deduct (#15): the same server, the same client and the same number of calls in
// flight; first --duration seconds of Deduct on one coupon, then --duration seconds of checkouts (Reserve,
// then Confirm of the hold it got) on another, then --duration seconds of DeductOrder of three coupons.
// Reported as operations per second and the ratio checkouts/s : deducts/s. A closed loop of typed grpc-js
// clients drives all three (the load workers only speak Deduct), so the ratio compares like with like;
// the absolute figures are below the flash-sale ones, which use pre-encoded requests.
import { createInventoryClient, type InventoryClient } from '../../src/client/grpc-client.js';
import { ConfirmOutcome, DeductOutcome, OrderOutcome, ReserveOutcome } from '../../src/gen/inventory/v1/inventory_pb.js';
import { CALL_TIMEOUT_MS, type BenchContext } from '../context.js';
import type { DesignRun } from '../designs.js';
import type { HoldsRecord, HoldsRun } from '../records.js';
import type { ServerHandle } from '../servers.js';

/** In flight per phase: enough to keep a 2-core box busy without the client process becoming the bottleneck. */
const CONCURRENCY = 64;

type Op = (i: number) => Promise<boolean>;

async function closedLoop(ctx: BenchContext, label: string, seconds: number, op: Op): Promise<HoldsRun> {
  const latencies: number[] = [];
  let done = 0;
  let ok = 0;
  let errors = 0;
  let firstError: string | undefined;
  let next = 0;
  const started = Date.now();
  const until = started + seconds * 1000;
  const tick = setInterval(() => ctx.progress.draw(label, Date.now() - started, seconds * 1000, `${done.toLocaleString('en')} ops`), 250);
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const t0 = performance.now();
        try {
          if (await op(next++)) ok++;
        } catch (err) {
          errors++;
          firstError ??= (err as Error).message;
        }
        latencies.push(performance.now() - t0);
        done++;
      }
    }),
  );
  clearInterval(tick);
  ctx.progress.clear();
  const elapsedS = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return { ops: done, ok, errors, firstError, elapsedS, perS: ok / elapsedS, p50Ms: pct(0.5), p99Ms: pct(0.99) };
}

export async function reserveConfirm(ctx: BenchContext, server: ServerHandle, d: DesignRun): Promise<HoldsRecord> {
  const { opts } = ctx;
  const seconds = opts.durationS;
  // Big enough never to run out within the run: a refusal would be cheaper than a success and flatter a side.
  const stock = 5_000_000;
  const prefix = `${ctx.runId}-rc-${d.label}`;
  const ids = { deduct: `${prefix}-d`, hold: `${prefix}-h`, order: [0, 1, 2].map((i) => `${prefix}-o${i}`) };
  await server.create([ids.deduct, ids.hold, ...ids.order].map((id) => ({ id, stock, shards: opts.shards })));
  const clients: InventoryClient[] = Array.from({ length: opts.connections }, () => createInventoryClient(server.addr));
  const client = (i: number) => clients[i % clients.length]!;
  const deadline = () => ({ deadlineMs: CALL_TIMEOUT_MS });
  // Request ids carry the phase (w: warm-up, m: measured) so the two never replay each other.
  const ops = (phase: string) => ({
    deduct: async (i: number) => {
      const r = await client(i).deduct(
        { couponId: ids.deduct, requestId: `${prefix}-${phase}d${i}`, userId: `u${i}`, quantity: 1n },
        deadline(),
      );
      return r.outcome === DeductOutcome.DEDUCTED;
    },
    checkout: async (i: number) => {
      const c = client(i);
      const r = await c.reserve(
        { couponId: ids.hold, requestId: `${prefix}-${phase}h${i}`, userId: `u${i}`, quantity: 1n, ttlMs: 60_000 },
        deadline(),
      );
      if (r.outcome !== ReserveOutcome.HELD) return false;
      const k = await c.confirm({ target: { case: 'holdId', value: r.hold!.holdId } }, deadline());
      return k.outcome === ConfirmOutcome.CONFIRMED;
    },
    order: async (i: number) => {
      const r = await client(i).deductOrder(
        {
          requestId: `${prefix}-${phase}o${i}`,
          userId: `u${i}`,
          items: ids.order.map((couponId) => ({ couponId, quantity: 1n })),
          ttlMs: 60_000,
        },
        deadline(),
      );
      return r.outcome === OrderOutcome.DEDUCTED;
    },
  });
  try {
    // Not measured: connections, JIT and script caches warm for all three, so the first phase is not the cold one.
    const warm = ops('w');
    const warmS = Math.min(1, seconds / 2);
    const warmed = [
      await closedLoop(ctx, `reserve-confirm ${d.label}: warm-up`, warmS, warm.deduct),
      await closedLoop(ctx, `reserve-confirm ${d.label}: warm-up`, warmS, warm.checkout),
      await closedLoop(ctx, `reserve-confirm ${d.label}: warm-up`, warmS, warm.order),
    ];
    const m = ops('m');
    const deduct = await closedLoop(ctx, `reserve-confirm ${d.label}: Deduct`, seconds, m.deduct);
    const checkout = await closedLoop(ctx, `reserve-confirm ${d.label}: Reserve + Confirm`, seconds, m.checkout);
    const order = await closedLoop(ctx, `reserve-confirm ${d.label}: DeductOrder of 3`, seconds, m.order);
    // The store's own count must match what the client saw, and nothing may be sold beyond the stock.
    const levels = new Map((await server.levels([ids.deduct, ids.hold, ...ids.order])).map((l) => [l.id, l.sold]));
    const notes: string[] = [];
    const check = (what: string, id: string, expected: number) => {
      const sold = levels.get(id) ?? -1;
      if (sold !== expected) notes.push(`${what}: the store counts ${sold} units sold, the client ${expected}`);
    };
    check('Deduct', ids.deduct, warmed[0]!.ok + deduct.ok);
    check('Reserve + Confirm', ids.hold, warmed[1]!.ok + checkout.ok);
    for (const id of ids.order) check('DeductOrder', id, warmed[2]!.ok + order.ok);
    for (const [what, r] of [
      ['Deduct', deduct],
      ['Reserve + Confirm', checkout],
      ['DeductOrder', order],
    ] as const)
      if (r.errors > 0) notes.push(`${what}: ${r.errors} failed calls; first: ${r.firstError}`);
    const rec: HoldsRecord = {
      design: d.label,
      concurrency: CONCURRENCY,
      seconds,
      deduct,
      reserveConfirm: checkout,
      deductOrder3: order,
      ratio: deduct.perS > 0 ? checkout.perS / deduct.perS : 0,
      orderRatio: deduct.perS > 0 ? order.perS / deduct.perS : 0,
      oversold: [...levels.values()].reduce((s, sold) => s + Math.max(0, sold - stock), 0),
      notes,
    };
    ctx.progress.line(
      `reserve-confirm ${d.label}: Deduct ${Math.round(deduct.perS)}/s, Reserve+Confirm ${Math.round(checkout.perS)} checkouts/s ` +
        `(ratio ${rec.ratio.toFixed(2)}), DeductOrder of 3 ${Math.round(order.perS)} orders/s (ratio ${rec.orderRatio.toFixed(2)}); c=${CONCURRENCY}`,
    );
    for (const n of notes) ctx.progress.line(`    ${n}`);
    return rec;
  } finally {
    for (const c of clients) c.close();
  }
}
