// Identities (src/domain/ids.ts) are stored in Redis, JetStream and MySQL: their formats are pinned here. The
// outbox entries the Lua scripts XADD must carry exactly the fields the event parser reads.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { eventId, ledgerKey, moveCreditId, moveIdFor, moveRound, restockCreditId, unreadableEventId } from '../src/domain/ids.js';
import { fromOutboxFields, OUTBOX_FIELDS } from '../src/settlement/event.js';

/** The field names of the script's one XADD: `'XADD', key, '*', 'name', value, …`. */
function xaddFields(script: string): string[] {
  const lua = readFileSync(new URL(`../lua/${script}`, import.meta.url), 'utf8');
  const call = /redis\.call\('XADD',\s*\w+,\s*'\*',([\s\S]*?)\)\s*\n/.exec(lua);
  if (!call) throw new Error(`${script} has no XADD`);
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

  it('when deduct-7.lua appends its event, then it writes every field the parser reads but the reason', () => {
    expect(xaddFields('deduct-7.lua').sort()).toEqual(all.filter((f) => f !== OUTBOX_FIELDS.reason));
  });

  it('when compensate-6.lua appends its event, then it writes every field the parser reads', () => {
    expect(xaddFields('compensate-6.lua').sort()).toEqual(all);
  });

  it('when an entry carries those fields, then the parser reads an event from it', () => {
    for (const script of ['deduct-7.lua', 'compensate-6.lua']) {
      const sample: Record<string, string> = {
        k: script.startsWith('deduct') ? 'D' : 'C',
        c: 'c1',
        r: 'r1',
        u: 'u1',
        q: '2',
        s: '0',
        t: '1',
        m: 'x',
      };
      const fields = xaddFields(script).flatMap((f) => [f, sample[f]!]);
      expect(fromOutboxFields(fields), script).toMatchObject({ couponId: 'c1', requestId: 'r1', quantity: 2 });
    }
  });
});
