// Identities (src/domain/ids.ts) are stored in Redis, JetStream and MySQL: their formats are pinned here. The
// outbox entries the Lua scripts XADD must carry exactly the fields the event parser reads.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { eventId, ledgerKey, moveCreditId, moveIdFor, moveRound, restockCreditId, unreadableEventId } from '../src/domain/ids.js';
import { fromOutboxFields, OUTBOX_FIELDS } from '../src/settlement/event.js';

const lua = (file: string) => readFileSync(new URL(`../lua/${file}`, import.meta.url), 'utf8');

/** The field names of the XADD of kind `k` in lua/includes/shard-ops.lua (which deduct-7.lua, compensate-6.lua
 * and shard-batch-7.lua all run): `'XADD', key, '*', 'k', '<kind>', 'name', value, …`. */
function xaddFields(kind: 'D' | 'C'): string[] {
  const calls = [...lua('includes/shard-ops.lua').matchAll(/redis\.call\('XADD',\s*[\w[\]]+,\s*'\*',([\s\S]*?)\)\s*\n/g)];
  const call = calls.find((c) => c[1]!.trim().startsWith(`'k', '${kind}'`));
  if (!call) throw new Error(`shard-ops.lua has no XADD of kind ${kind}`);
  const args = call[1]!.split(',').map((a) => a.trim());
  return args.filter((_, i) => i % 2 === 0).map((a) => /^'(\w+)'$/.exec(a)?.[1] ?? `<not a literal: ${a}>`);
}

describe('ids', () => {
  it('when ids are built, then they keep the formats already stored', () => {
    expect(eventId({ kind: 'D', couponId: 'c1', requestId: 'r1' })).toBe('D:c1:r1');
    expect(ledgerKey('C', 'r1')).toBe('C:r1');
    expect(unreadableEventId('tag', '1-0')).toBe('X:tag:1-0');
    const round = moveRound('r1', 'abc', 2);
    expect(round).toBe('r1/abc.2');
    expect(moveIdFor(round, 3, 0)).toBe('r1/abc.2/3>0');
    expect(moveCreditId('m')).toBe('M:m');
    expect(restockCreditId('s1')).toBe('R:s1');
  });
});

describe('outbox fields', () => {
  const all = Object.values(OUTBOX_FIELDS).sort();

  it('when a deduction appends its event, then it writes every field the parser reads but the reason', () => {
    expect(xaddFields('D').sort()).toEqual(all.filter((f) => f !== OUTBOX_FIELDS.reason));
  });

  it('when a compensation appends its event, then it writes every field the parser reads', () => {
    expect(xaddFields('C').sort()).toEqual(all);
  });

  it('when a script appends deduct or compensate events, then it does so through shard-ops.lua only', () => {
    for (const script of ['deduct-7.lua', 'compensate-6.lua', 'shard-batch-7.lua']) {
      expect(lua(script), script).toMatch(/^-- @include shard-ops$/m);
      expect(lua(script), script).not.toMatch(/'XADD'/);
    }
  });

  it('when an entry carries those fields, then the parser reads an event from it', () => {
    for (const kind of ['D', 'C'] as const) {
      const sample: Record<string, string> = {
        k: kind,
        c: 'c1',
        r: 'r1',
        u: 'u1',
        q: '2',
        s: '0',
        t: '1',
        m: 'x',
      };
      const fields = xaddFields(kind).flatMap((f) => [f, sample[f]!]);
      expect(fromOutboxFields(fields), kind).toMatchObject({ couponId: 'c1', requestId: 'r1', quantity: 2 });
    }
  });
});
