// The set-up step (`npm run stack -- setup`) is the only place packages are installed, and it covers every
// program the suites and the benchmark start by name, so a fresh machine passes the first time.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { MARIADB_PROGRAMS, missingPackages, SETUP_TOOLS, STACK_PROGRAMS, TEST_PROGRAMS, which } from '../deploy/local/system-packages.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const THIS = relative(ROOT, fileURLToPath(import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|mts|mjs)$/.test(f))
    .map((f) => join(dir, f));
}
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

describe('set-up step', () => {
  it('when the suites start, then every program the set-up step lists is installed (it ran before any test file)', () => {
    expect(missingPackages([...STACK_PROGRAMS, ...TEST_PROGRAMS])).toEqual([]);
    for (const p of [...STACK_PROGRAMS, ...TEST_PROGRAMS]) expect(which(p.bin), p.bin).toBeDefined();
  });

  it('when a test, fixture or the benchmark starts a program by name, then the set-up step installs it', () => {
    const listed = new Set([...STACK_PROGRAMS, ...MARIADB_PROGRAMS, ...TEST_PROGRAMS].map((p) => p.bin));
    // Part of every Debian system (essential packages), never missing.
    const essential = new Set(['bash', 'sh', 'sleep', 'flock', 'kill']);
    const started = new Map<string, string>();
    for (const file of [...sources('test'), ...sources('test-faults'), ...sources('bench'), ...sources('deploy/local')]) {
      for (const m of read(file).matchAll(/\b(?:spawn|spawnSync|execFile|execFileSync|run)\(\s*'([a-z][\w.-]*)'/g))
        started.set(m[1]!, file);
    }
    expect(started.size).toBeGreaterThan(3);
    for (const [bin, file] of started) {
      if (SETUP_TOOLS.includes(bin)) continue;
      const fromNpm = existsSync(join(ROOT, 'node_modules', '.bin', bin)); // tsx, vitest: installed by npm ci
      expect(listed.has(bin) || essential.has(bin) || fromNpm, `${file} starts ${bin}, which the set-up step does not install`).toBe(true);
    }
  });

  it('when the test sources are read, then none of them installs a package', () => {
    const installers = [`apt${'-get'}`, `apt ${'install'}`, `${'dpkg'} -i`];
    for (const file of [...sources('test'), ...sources('test-faults')].filter((f) => f !== THIS)) {
      for (const word of installers) expect(read(file).includes(word), `${file} mentions ${word}`).toBe(false);
    }
  });
});
