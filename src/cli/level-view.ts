// How a stock level reads on a terminal: shared by `coupon get`, `coupon restock` and `watch`.
import type { Out } from './io.js';
import { saleRows, type PlainLevel } from './plain.js';
import { bar, fmt, keyValues, table } from './render.js';

export function printLevel(out: Out, l: PlainLevel): void {
  keyValues(out, [
    ['coupon', l.couponId],
    ['total stock', l.totalStock],
    ['available', l.available],
    ['deducted (net)', l.deducted],
    ['settled remaining', l.settledRemaining],
    ['pending settlement', l.pendingSettlement],
    ['sold out', l.soldOut],
    ['observed at', l.observedAt],
    ...saleRows(l.sale),
  ]);
  if (l.shards.length > 0) {
    out.write('\n');
    const max = Math.max(1, ...l.shards.map((s) => s.available + s.inTransit));
    table(
      out,
      ['shard', 'available', 'in transit', ''],
      l.shards.map((s) => [s.index, s.available, s.inTransit, bar(s.available, max, 20)]),
    );
  }
}

/** One line per update when the output is not a terminal. */
export function levelLine(l: PlainLevel): string {
  return `${l.observedAt ?? new Date().toISOString()}  ${l.couponId}  available=${fmt(l.available)}  deducted=${fmt(l.deducted)}  settled_remaining=${fmt(l.settledRemaining)}  pending=${fmt(l.pendingSettlement)}${l.soldOut ? '  SOLD OUT' : ''}${l.sale.status === 'open' ? '' : `  SALE ${l.sale.status.toUpperCase()}`}`;
}
