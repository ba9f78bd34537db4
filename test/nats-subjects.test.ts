// The NATS subjects (src/nats/subjects.ts): one escape for coupon ids, and deploy/nats/permissions.conf still
// granting each subject to whom it should (a static check; test/nats-permissions.test.ts runs a server with it).
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { natsSubjects, subjectToken } from '../src/nats/subjects.js';

/** NATS subject matching: `*` is one token, `>` one or more trailing tokens. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

const conf = readFileSync(new URL('../deploy/nats/permissions.conf', import.meta.url), 'utf8');
/** The allow (or deny) list of one user's publish or subscribe permission, as written in the file. */
function rule(user: string, op: 'publish' | 'subscribe', kind: 'allow' | 'deny'): string[] {
  const block = conf.slice(conf.indexOf(`user: ${user}`));
  const end = block.indexOf('\n    }');
  const section = block.slice(block.indexOf(`${op}:`), end);
  const list = new RegExp(`${kind}:\\s*\\[([^\\]]*)\\]`).exec(section.slice(0, section.indexOf('}') + 1) || section);
  return list ? [...list[1]!.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) : [];
}
const allowed = (user: string, op: 'publish' | 'subscribe', subject: string) =>
  rule(user, op, 'allow').some((p) => matches(p, subject)) && !rule(user, op, 'deny').some((p) => matches(p, subject));

const ID = fc.stringMatching(/^[A-Za-z0-9._:-]{1,64}$/);

describe('NATS subjects', () => {
  it('when a coupon id holds dots or underscores, then its token has no dot and no two ids share a token', () => {
    expect(subjectToken('sale.2026:a-b')).toBe('sale_2E2026:a-b');
    expect(subjectToken('a_2Eb')).toBe('a_5F2Eb');
    expect(subjectToken('plain')).toBe('plain');
    fc.assert(
      fc.property(ID, ID, (a, b) => {
        expect(subjectToken(a)).not.toContain('.');
        if (a !== b) expect(subjectToken(a)).not.toBe(subjectToken(b));
      }),
    );
  });

  it('when the deployed permissions are read, then the service may publish and subscribe every subject it uses', () => {
    const s = natsSubjects('shardstock');
    for (const subject of [s.events('a.b'), s.level('a.b'), s.lowStock('a.b'), s.stockReturned('a.b')]) {
      expect(allowed('shardstock', 'publish', subject), subject).toBe(true);
      expect(allowed('shardstock', 'subscribe', subject), subject).toBe(true);
    }
    expect(allowed('shardstock', 'subscribe', s.stockReturnedAll)).toBe(true);
  });

  it('when the deployed permissions are read, then an observer may watch levels and low-stock events but publish nothing of ours', () => {
    const s = natsSubjects('shardstock');
    expect(allowed('observer', 'subscribe', s.level('a'))).toBe(true);
    expect(allowed('observer', 'subscribe', s.lowStock('a'))).toBe(true);
    for (const subject of [s.events('a'), s.level('a'), s.lowStock('a'), s.stockReturned('a')]) {
      expect(allowed('observer', 'publish', subject), subject).toBe(false);
    }
    expect(allowed('observer', 'subscribe', s.events('a'))).toBe(false);
  });
});
