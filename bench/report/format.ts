// Number formatting and a plain fixed-width table, shared by the console and Markdown outputs.

export const int = (v: number) => Math.round(v).toLocaleString('en');
export const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
export const pct = (v: number) => `${Math.round(v)}%`;

export function textTable(head: string[], rows: string[][], rightAlign: boolean[] = []): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const cell = (s: string, i: number) => (rightAlign[i] ? s.padStart(widths[i]!) : s.padEnd(widths[i]!));
  return [head.map(cell).join('  '), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((r) => r.map(cell).join('  '))].join('\n');
}

export function markdownTable(head: string[], rows: string[][], rightAlign: boolean[] = []): string {
  const sep = head.map((_, i) => (rightAlign[i] ? '---:' : '---'));
  const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(head), line(sep), ...rows.map(line)].join('\n');
}
