// Identities (src/domain/ids.ts) are stored in Redis, JetStream and MySQL: their formats are pinned here. The
// outbox entries the Lua scripts XADD must carry exactly the fields the event parser reads.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { eventId, ledgerKey, moveCreditId, moveIdFor, moveRound, restockCreditId, unreadableEventId } from '../src/domain/ids.js';
import { recordField, requestIdOfField } from '../src/redis/keys.js';
import { CONFIRMED_HOLD, fromOutboxEntry, fromOutboxFields, OUTBOX_FIELDS } from '../src/settlement/event.js';

const lua = (file: string) => readFileSync(new URL(`../lua/${file}`, import.meta.url), 'utf8');

/** The field names of the one-event XADD in hold-confirm-7.lua: `'XADD', key, '*', 'k', 'D', 'name', value, …`. */
function xaddFields(): string[] {
  const call = /redis\.call\('XADD',\s*[\w[\]]+,\s*'\*',([\s\S]*?)\)\s*\n/.exec(lua('hold-confirm-7.lua'));
  if (!call) throw new Error('hold-confirm-7.lua has no XADD');
  const args = call[1]!.split(',').map((a) => a.trim());
  return args.filter((_, i) => i % 2 === 0).map((a) => /^'(\w+)'$/.exec(a)?.[1] ?? `<not a literal: ${a}>`);
}

describe('ids', () => {
  it('when a request id is made a record field, then the field gives the id back', () => {
    for (const id of ['r1', '0f8fad5b-d9cb-469f-a165-70867728950e', '0F8FAD5B-D9CB-469F-A165-70867728950E']) {
      const f = recordField(id);
      expect(requestIdOfField(typeof f === 'string' ? Buffer.from(f) : f)).toBe(id);
    }
    expect(recordField('0f8fad5b-d9cb-469f-a165-70867728950e')).toHaveLength(17);
  });

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

  it('when a confirmed hold appends its one-event entry, then it writes every field the parser reads, its reason the hold mark', () => {
    expect(xaddFields().sort()).toEqual(all);
    expect(lua('hold-confirm-7.lua')).toContain(`'${OUTBOX_FIELDS.reason}', '${CONFIRMED_HOLD}'`);
  });

  it('when a script appends deduct or compensate events, then it does so through shard-ops.lua only', () => {
    for (const script of ['deduct-7.lua', 'compensate-6.lua', 'shard-batch-8.lua']) {
      expect(lua(script), script).toMatch(/^-- @include shard-ops$/m);
      expect(lua(script), script).not.toMatch(/'XADD'/);
    }
  });

  it('when a one-event entry carries those fields, then the parser reads an event from it', () => {
    const sample: Record<string, string> = { k: 'D', c: 'c1', r: 'r1', u: 'u1', q: '2', s: '0', t: '1', m: CONFIRMED_HOLD };
    const fields = xaddFields().flatMap((f) => [f, sample[f]!]);
    expect(fromOutboxEntry(fields).map((e) => e.event)).toEqual([
      { kind: 'D', couponId: 'c1', requestId: 'r1', userId: 'u1', quantity: 2, shard: 0, occurredAt: 1, reason: CONFIRMED_HOLD },
    ]);
    expect(fromOutboxFields(fields.slice(0, -2))).toMatchObject({ kind: 'D', reason: '' });
  });

  it('when a packed entry carries several events, then each is read with the shared coupon, shard and time, a reason may hold |, and a broken one is passed on alone', () => {
    const fields = ['c', 'c1', 's', '3', 't', '1700', 'D', 'r1|u1|2', 'D', 'r2||1', 'C', 'r1|u1|2|refund | late', 'D', 'broken'];
    const events = fromOutboxEntry(fields);
    const base = { couponId: 'c1', shard: 3, occurredAt: 1700 };
    expect(events.map((e) => e.event)).toEqual([
      { ...base, kind: 'D', requestId: 'r1', userId: 'u1', quantity: 2, reason: '' },
      { ...base, kind: 'D', requestId: 'r2', userId: '', quantity: 1, reason: '' },
      { ...base, kind: 'C', requestId: 'r1', userId: 'u1', quantity: 2, reason: 'refund | late' },
      null,
    ]);
    expect(events[3]!.raw).toEqual(['c', 'c1', 's', '3', 't', '1700', 'D', 'broken']);
    // Neither form: one unreadable event with every field.
    expect(fromOutboxEntry(['x', '1'])).toEqual([{ event: null, raw: ['x', '1'] }]);
  });
});
