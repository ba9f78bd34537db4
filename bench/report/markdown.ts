// The Markdown summary (bench/out/report.md, and the generated part of docs/benchmark.md).
import { int, markdownTable, ms } from './format.js';
import type { BenchReport } from './model.js';
import { RUN_HEAD, RUN_RIGHT, runRow } from './runs-table.js';

const SCENARIO_TITLES: Record<string, string> = {
  'flash-sale': 'Flash sale (one hot coupon, runs until sold out)',
  'many-coupons': 'Many coupons (traffic spread round-robin)',
  'sold-out-storm': 'Sold-out storm (all traffic after exhaustion)',
};

const mark = (p: boolean | null) => (p === null ? 'n/a' : p ? '**PASS**' : '**MISS**');

export function markdown(rep: BenchReport, chartPath: string): string {
  const o = rep.options;
  const out: string[] = [];
  out.push(
    `Measured ${rep.finishedAt.slice(0, 16).replace('T', ' ')} UTC, \`npm run bench${rep.mode === 'quick' ? ' -- --quick' : ''}\` (${rep.mode} mode, ${rep.durationS.toFixed(0)} s), ` +
      `${rep.machine.cpus} × ${rep.machine.cpuModel}, Node ${rep.machine.node}, load average at start ${rep.machine.loadAvgAtStart.map((l) => l.toFixed(2)).join(' / ')}. ` +
      `Everything — the service or baseline, Redis Cluster (3 masters + 3 replicas), NATS, MariaDB and the load generator (${rep.loadGenerator}) — shares these cores.`,
  );
  out.push('');
  out.push(`![flash-sale throughput and p99 against concurrency](${chartPath})`);
  out.push('');
  out.push('## Targets');
  out.push('');
  out.push(
    markdownTable(
      ['target', 'want', 'measured', 'result'],
      rep.targets.map((t) => [t.name, t.want, t.measured, mark(t.pass)]),
    ),
  );
  out.push('');
  for (const sc of ['flash-sale', 'many-coupons', 'sold-out-storm']) {
    const order = [...new Set(rep.runs.map((r) => r.design))];
    const rs = rep.runs
      .filter((r) => r.scenario === sc)
      .sort((a, b) => order.indexOf(a.design) - order.indexOf(b.design) || a.concurrency - b.concurrency);
    if (rs.length === 0) continue;
    out.push(`## ${SCENARIO_TITLES[sc]}`);
    out.push('');
    out.push(
      markdownTable(
        RUN_HEAD.slice(1),
        rs.map((r) => runRow(r).slice(1)),
        RUN_RIGHT.slice(1),
      ),
    );
    out.push('');
    out.push(...notesOf(rs));
    if (sc === 'flash-sale') {
      out.push(
        `Stock: ${int(o.stock)} units for shardstock / noop / single-key, ${int(o.slowStock)} for mysql / lock; ${o.shards} shards. ` +
          "CPU columns: server = the process under test, % of one core; client = the load generator's CPU per call; redis = all six nodes; machine = % of all cores.",
      );
      out.push('');
      const extra = rs
        .filter((r) => r.serverStats)
        .map(
          (r) =>
            `- ${r.design} (${r.concurrency}): ${
              Object.entries(r.serverStats!)
                .filter(([, v]) => v)
                .map(([k, v]) => `${k} ${int(v)}`)
                .join(', ') || 'no fallbacks'
            }${batchShape(r.serverStats!)}`,
        );
      if (extra.length)
        out.push(
          'Service internals during the runs (fallback moves between shards, sold-out fast path, Redis calls of the group commit):',
          '',
          ...extra,
          '',
        );
    }
  }
  const ratios = rep.ratios.filter((r) => r.design === 'shardstock');
  if (ratios.length) {
    out.push('## shardstock against each baseline');
    out.push('');
    out.push(
      markdownTable(
        ['scenario', 'baseline', 'in flight', 'shardstock /s', 'baseline /s', 'ratio'],
        ratios.map((r) => [r.scenario, r.baseline, String(r.at), int(r.service), int(r.baselineValue), `${r.ratio.toFixed(2)}x`]),
        [false, false, true, true, true, true],
      ),
    );
    out.push('');
  }
  if (rep.cpuBudget.length) {
    out.push('## CPU per deduction (flash sale, best run of each design)');
    out.push('');
    out.push(
      'Throughput on a box this small is set by how much CPU one deduction costs, because the server, Redis, MariaDB and ' +
        "the load generator all share the same cores. The Redis and MariaDB figures are the whole servers' CPU divided by the calls " +
        'made, so they include whatever else ran on the box at the time.',
    );
    out.push('');
    out.push(
      markdownTable(
        ['design', 'in flight', 'server µs', 'redis µs', 'mysql µs', 'design total µs', 'client µs', 'ceiling if alone /s'],
        rep.cpuBudget.map((b) => [
          b.design,
          String(b.concurrency),
          int(b.serverUs),
          int(b.redisUs),
          int(b.mysqlUs),
          int(b.stackUs),
          int(b.clientUs),
          int(b.ceilingPerS),
        ]),
        [false, true, true, true, true, true, true, true],
      ),
    );
    out.push('');
  }
  const h = rep.holds;
  if (h) {
    out.push('## Holds and orders against Deduct (reserve-confirm)');
    out.push('');
    out.push(
      `The same server (${h.design}) and the same typed grpc-js clients, ${h.concurrency} operations in flight, ${h.seconds} s each; a checkout is a Reserve then a Confirm of its hold (two calls), an order deducts one unit of each of three coupons.`,
    );
    out.push('');
    const row = (what: string, r: typeof h.deduct, ratio: string) => [
      what,
      int(r.ok),
      int(r.perS),
      ms(r.p50Ms),
      ms(r.p99Ms),
      ratio,
      int(r.errors),
    ];
    out.push(
      markdownTable(
        ['operation', 'succeeded', 'per s', 'p50 ms', 'p99 ms', 'vs Deduct', 'errors'],
        [
          row('Deduct', h.deduct, '1.00'),
          row('Reserve + Confirm', h.reserveConfirm, h.ratio.toFixed(2)),
          row('DeductOrder of 3 coupons', h.deductOrder3, h.orderRatio.toFixed(2)),
        ],
        [false, true, true, true, true, true, true],
      ),
    );
    if (h.notes.length) out.push('', ...h.notes.map((n) => `- ${n}`));
    out.push('');
  }
  const st = rep.settlement;
  if (st) {
    out.push('## Settlement (relay + settle into MySQL)');
    out.push('');
    if (!st.available) out.push(`Not measured: ${st.reason}`);
    else {
      const rows: string[][] = [];
      if (st.batched)
        rows.push([
          `batched (SHARDSTOCK_SETTLE_BATCH=${st.batched.settleBatch})`,
          int(st.batched.events),
          st.batched.seconds.toFixed(2),
          int(st.batched.eventsPerS),
        ]);
      if (st.single)
        rows.push([
          `one event per transaction (SHARDSTOCK_SETTLE_BATCH=${st.single.settleBatch})`,
          int(st.single.events),
          st.single.seconds.toFixed(2),
          int(st.single.eventsPerS),
        ]);
      if (rows.length) out.push(markdownTable(['pipeline', 'events', 'seconds', 'events/s'], rows, [false, true, true, true]), '');
      if (st.lag)
        out.push(
          `Lag deduct → settled during a flash sale of ${int(st.lag.units)} units at ${int(st.lag.deductRate)} deducts/s: p50 ${ms(st.lag.p50Ms)} ms, p99 ${ms(st.lag.p99Ms)} ms, max ${ms(st.lag.maxMs)} ms; all settled ${st.lag.settledAllAfterS.toFixed(2)} s after the first deduction.`,
        );
    }
    if (st.notes.length) out.push('', ...st.notes.map((n) => `- ${n}`));
    out.push('');
  }
  out.push(
    `Every run counts oversold units as successes beyond the stock, from the client's answers and from the design's own store; total: **${rep.oversoldTotal}**.`,
  );
  return out.join('\n');
}

/** Run notes as a list; a note every run of the table shares is said once. */
function notesOf(rs: BenchReport['runs']): string[] {
  const byText = new Map<string, string[]>();
  for (const r of rs) for (const n of r.notes) byText.set(n, [...(byText.get(n) ?? []), `${r.design} (${r.concurrency})`]);
  const lines = [...byText].map(([n, who]) => (who.length === rs.length && rs.length > 1 ? `- ${n}` : `- ${who.join(', ')}: ${n}`));
  return lines.length ? [...lines, ''] : [];
}

/** The group commit's shape from a run's counters: requests per Redis call, and the shards they were on. */
function batchShape(stats: Record<string, number>): string {
  const calls = stats.batchCalls ?? 0;
  if (calls === 0) return '';
  const perCall = (stats.batchRequests ?? 0) / calls;
  const shards = (stats.batchShards ?? 0) / calls;
  return `; ${perCall.toFixed(1)} requests per Redis call, on ${shards.toFixed(1)} shards`;
}
