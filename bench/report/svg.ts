// The chart the README embeds: flash-sale deductions per second and p99 latency against in-flight requests,
// one line per design. Plain SVG, no dependencies.
import type { RunRecord } from '../records.js';

const COLORS: Record<string, string> = {
  shardstock: '#d62728',
  'shardstock-leader': '#ff7f0e',
  noop: '#7f7f7f',
  'single-key': '#1f77b4',
  lock: '#9467bd',
  mysql: '#2ca02c',
};

interface Series {
  name: string;
  color: string;
  points: [number, number][];
}

interface Panel {
  title: string;
  yLabel: string;
  logY: boolean;
  series: Series[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const fmt = (v: number) => (v >= 1000 ? `${+(v / 1000).toFixed(1)}k` : `${+v.toFixed(v < 10 ? 1 : 0)}`);

function niceTicks(min: number, max: number, log: boolean): number[] {
  if (log) {
    const ticks: number[] = [];
    for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) for (const m of [1, 2, 5]) ticks.push(m * 10 ** e);
    return ticks.filter((t) => t >= min * 0.999 && t <= max * 1.001);
  }
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw || 1));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const ticks: number[] = [];
  // One tick at or above the largest value, so the axis ends on a labelled line.
  for (let t = 0; ticks.length === 0 || ticks[ticks.length - 1]! < max - 1e-9; t += step) ticks.push(t);
  return ticks;
}

function panel(p: Panel, xs: number[], ox: number, oy: number, w: number, h: number): string {
  const m = { l: 62, r: 26, t: 30, b: 42 };
  const pw = w - m.l - m.r;
  const ph = h - m.t - m.b;
  const ys = p.series.flatMap((s) => s.points.map((pt) => pt[1])).filter((v) => v > 0);
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs);
  const lx = (x: number) => (xMax === xMin ? pw / 2 : ((Math.log2(x) - Math.log2(xMin)) / (Math.log2(xMax) - Math.log2(xMin))) * pw);
  let yMin = p.logY ? Math.max(0.1, Math.min(...ys) * 0.8) : 0;
  let yMax = Math.max(...ys, 1) * (p.logY ? 1.1 : 1.02);
  if (p.logY) {
    yMin = 10 ** Math.floor(Math.log10(yMin));
    yMax = 10 ** Math.ceil(Math.log10(yMax));
  }
  const yTicks = niceTicks(yMin, yMax, p.logY);
  if (!p.logY) yMax = yTicks[yTicks.length - 1]!;
  const ly = (y: number) =>
    ph - (p.logY ? ((Math.log10(Math.max(y, yMin)) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin))) * ph : (y / yMax) * ph);
  const parts: string[] = [`<g transform="translate(${ox + m.l},${oy + m.t})">`];
  parts.push(`<text x="${pw / 2}" y="-12" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`);
  for (const t of yTicks) {
    parts.push(`<line x1="0" x2="${pw}" y1="${ly(t).toFixed(1)}" y2="${ly(t).toFixed(1)}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="-6" y="${(ly(t) + 4).toFixed(1)}" text-anchor="end">${fmt(t)}</text>`);
  }
  for (const x of xs) parts.push(`<text x="${lx(x).toFixed(1)}" y="${ph + 16}" text-anchor="middle">${x}</text>`);
  parts.push(`<line x1="0" x2="${pw}" y1="${ph}" y2="${ph}" stroke="#333"/><line x1="0" x2="0" y1="0" y2="${ph}" stroke="#333"/>`);
  parts.push(`<text x="${pw / 2}" y="${ph + 34}" text-anchor="middle">requests in flight</text>`);
  parts.push(`<text transform="translate(-48,${ph / 2}) rotate(-90)" text-anchor="middle">${esc(p.yLabel)}</text>`);
  for (const s of p.series) {
    const pts = s.points.filter((pt) => pt[1] > 0).sort((a, b) => a[0] - b[0]);
    if (pts.length > 1)
      parts.push(
        `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map(([x, y]) => `${lx(x).toFixed(1)},${ly(y).toFixed(1)}`).join(' ')}"/>`,
      );
    for (const [x, y] of pts) parts.push(`<circle cx="${lx(x).toFixed(1)}" cy="${ly(y).toFixed(1)}" r="3.5" fill="${s.color}"/>`);
  }
  parts.push('</g>');
  return parts.join('\n');
}

export function flashSaleChart(runs: RunRecord[], subtitle: string): string {
  const fs = runs.filter((r) => r.scenario === 'flash-sale');
  const designs = [...new Set(fs.map((r) => r.design))];
  const xs = [...new Set(fs.map((r) => r.concurrency))].sort((a, b) => a - b);
  const W = 980;
  const H = 420;
  if (fs.length === 0)
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="60"><text x="10" y="30">no flash-sale runs</text></svg>`;
  const series = (pick: (r: RunRecord) => number): Series[] =>
    designs.map((d) => ({
      name: d,
      color: COLORS[d] ?? '#17becf',
      points: fs.filter((r) => r.design === d).map((r) => [r.concurrency, pick(r)] as [number, number]),
    }));
  const legend = designs.map((d, i) => {
    const x = 70 + i * 150;
    return `<rect x="${x}" y="${H - 22}" width="14" height="4" fill="${COLORS[d] ?? '#17becf'}"/><text x="${x + 20}" y="${H - 16}">${esc(d)}</text>`;
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">Flash sale: one hot coupon, quantity 1, distinct users</text>`,
    `<text x="${W / 2}" y="34" text-anchor="middle" fill="#555">${esc(subtitle)}</text>`,
    panel(
      { title: 'successful deductions per second', yLabel: 'deducts/s', logY: false, series: series((r) => r.deductRate) },
      xs,
      0,
      40,
      W / 2,
      H - 70,
    ),
    panel({ title: 'p99 latency (log scale)', yLabel: 'p99 ms', logY: true, series: series((r) => r.p99Ms) }, xs, W / 2, 40, W / 2, H - 70),
    ...legend,
    '</svg>',
  ].join('\n');
}
