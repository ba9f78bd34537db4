// Human output: aligned tables, key/value blocks and number formatting. Machine output (--json) is plain
// JSON objects, one per line for streams.
import { println, type Out } from './io.js';

const group = new Intl.NumberFormat('en-US');

/** 1234567 -> "1,234,567"; leaves strings alone. */
export function fmt(v: unknown): string {
  if (typeof v === 'number' && Number.isFinite(v)) return Number.isInteger(v) ? group.format(v) : v.toFixed(1);
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (v === undefined || v === null) return '-';
  return String(v);
}

const NUMERIC = /^-?[\d,]+(\.\d+)?%?$/;

export function table(out: Out, headers: string[], rows: unknown[][]): void {
  const cells = rows.map((r) => r.map(fmt));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (NUMERIC.test(c) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  println(out, line(headers));
  println(out, widths.map((w) => '─'.repeat(w)).join('  '));
  for (const r of cells) println(out, line(r));
}

export function keyValues(out: Out, pairs: [string, unknown][]): void {
  const w = Math.max(...pairs.map(([k]) => k.length));
  for (const [k, v] of pairs) println(out, `${k.padEnd(w)}  ${fmt(v)}`);
}

export function json(out: Out, value: unknown): void {
  println(out, JSON.stringify(value));
}

/** A bar of `width` cells filled to `value / max`. */
export function bar(value: number, max: number, width: number): string {
  const n = max > 0 ? Math.max(0, Math.min(width, Math.round((value / max) * width))) : 0;
  return '█'.repeat(n) + '░'.repeat(width - n);
}
