// The committed generated code matches the proto (regenerated offline with the project's buf), and the
// proto passes buf lint STANDARD.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUF = join(ROOT, 'node_modules/.bin/buf');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : [join(dir, f)]));
}

describe('protobuf contract', () => {
  it('when buf generate runs again, then src/gen is byte-for-byte what is committed', () => {
    const out = mkdtempSync(join(tmpdir(), 'shardstock-gen-'));
    try {
      execFileSync(BUF, ['generate', '-o', out], { cwd: ROOT, stdio: 'pipe' });
      const fresh = files(join(out, 'src/gen'))
        .map((f) => relative(join(out, 'src/gen'), f))
        .sort();
      const committed = files(join(ROOT, 'src/gen'))
        .map((f) => relative(join(ROOT, 'src/gen'), f))
        .sort();
      expect(fresh).toEqual(committed);
      for (const f of fresh) {
        expect(readFileSync(join(out, 'src/gen', f), 'utf8'), `${f} is stale: run npm run generate`).toBe(
          readFileSync(join(ROOT, 'src/gen', f), 'utf8'),
        );
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('when buf lint runs, then the proto passes STANDARD', () => {
    expect(() => execFileSync(BUF, ['lint'], { cwd: ROOT, stdio: 'pipe' })).not.toThrow();
  });
});
