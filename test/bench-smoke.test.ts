// The benchmark is a tool, not a test: this only proves `npm run bench -- --quick` works end to end on a tiny
// configuration and that every design stayed exact. No timing is asserted.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConnection } from 'mysql2/promise';
import { afterAll, describe, expect, test } from 'vitest';
import type { BenchReport } from '../bench/report/model.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function bench(args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('npm run bench', () => {
  const out = mkdtempSync(join(tmpdir(), 'shardstock-bench-'));
  // Its own database: the benchmark recreates the one it is given, and other suites may run a benchmark too.
  const db = `shardstock_bench_smoke_${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    rmSync(out, { recursive: true, force: true });
    const conn = await createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
    await conn.query(`drop database if exists \`${db}\``);
    await conn.end();
  });

  test('when --help is given, then it lists the scenarios and the options and exits 0', async () => {
    const r = await bench(['--help'], 30_000);
    expect(r.code).toBe(0);
    for (const word of [
      'flash-sale',
      'many-coupons',
      'sold-out-storm',
      'settlement',
      'reserve-confirm',
      '--quick',
      '--scenarios',
      '--designs',
      '--concurrency',
      '--stock',
      '--out',
      '--ack-level',
    ]) {
      expect(r.stdout).toContain(word);
    }
  });

  test('when an option is unknown, then it says so and exits 2', async () => {
    const r = await bench(['--no-such-option'], 30_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no-such-option');
  });

  test('when --quick runs a tiny configuration, then the report files exist, parse, and every design sold no unit beyond its stock', async () => {
    const r = await bench(
      [
        '--quick',
        '--out',
        out,
        '--no-docs',
        '--no-progress',
        '--mysql-url',
        `mysql://root@127.0.0.1:3306/${db}`,
        '--concurrency',
        '32',
        '--storm-concurrency',
        '32',
        '--stock',
        '400',
        '--slow-stock',
        '100',
        '--shards',
        '4',
        '--coupons',
        '20',
        '--coupon-stock',
        '10',
        '--duration',
        '0.5',
        '--settle-events',
        '100',
        '--max-run',
        '3',
      ],
      240_000,
    );
    expect(r.code, `bench exited ${r.code}\n${r.stderr}\n${r.stdout}`).toBe(0);
    for (const f of ['report.json', 'report.md', 'chart.svg']) expect(existsSync(join(out, f)), f).toBe(true);

    const rep = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as BenchReport;
    const designs = ['shardstock', 'shardstock-leader', 'noop', 'single-key', 'lock', 'mysql'];
    expect(new Set(rep.runs.filter((x) => x.scenario === 'flash-sale').map((x) => x.design))).toEqual(new Set(designs));
    for (const sc of ['many-coupons', 'sold-out-storm']) {
      expect(new Set(rep.runs.filter((x) => x.scenario === sc).map((x) => x.design)), sc).toEqual(
        new Set(designs.filter((d) => d !== 'shardstock-leader')),
      );
    }
    for (const run of rep.runs) {
      const what = `${run.scenario} ${run.design}`;
      expect(run.oversold, what).toBe(0);
      expect(run.storeSold, what).toBeLessThanOrEqual(run.stock);
      // The store never counts fewer units than the client was told it got.
      expect(run.storeMinusClient, what).toBeGreaterThanOrEqual(0);
      if (run.scenario === 'flash-sale' && run.soldOut) expect(run.storeSold, `${what}: sold out with units left`).toBe(run.stock);
    }
    expect(rep.oversoldTotal).toBe(0);
    expect(rep.targets.find((t) => t.name.startsWith('oversold'))?.pass).toBe(true);
    expect(rep.settlement?.available).toBe(true);
    expect(rep.settlement?.oversold ?? 0).toBe(0);
    // Reserve + Confirm and DeductOrder measured against Deduct on the same server, as ratios.
    expect(rep.holds?.design).toBe('shardstock');
    expect(rep.holds?.oversold).toBe(0);
    expect(rep.holds?.deduct.ok).toBeGreaterThan(0);
    expect(rep.holds?.ratio).toBeGreaterThan(0);
    expect(rep.holds?.notes).toEqual([]);

    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).toContain('## Targets');
    expect(md).toContain('## Holds and orders against Deduct');
    expect(md).toMatch(/oversold units.*\*\*0\*\*/s);
    const svg = readFileSync(join(out, 'chart.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    for (const d of designs) expect(svg).toContain(`>${d}</text>`);
  }, 300_000);
});
