// The batch decision of the settler, without I/O: which events become ledger rows, and which wait.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { planBatch, type Planned } from '../src/settlement/settle/settle-plan.js';
import type { SettlementEvent } from '../src/settlement/event.js';

const ev = (kind: 'D' | 'C', requestId: string, quantity: number): Planned<string> => ({
  event: { kind, couponId: 'c', requestId, userId: '', quantity, shard: 0, occurredAt: 0, reason: '' } satisfies SettlementEvent,
  ref: `${kind}:${requestId}`,
});
const refs = (xs: Planned<string>[]) => xs.map((x) => x.ref);

describe('planBatch', () => {
  it('when events are new and fit, then all become ledger rows and the remaining moves by their net', () => {
    const p = planBatch({
      remaining: 10,
      events: [ev('D', 'a', 3), ev('D', 'b', 2), ev('C', 'a', 3)],
      settled: new Set(),
      refused: new Set(),
    });
    expect(refs(p.apply)).toEqual(['D:a', 'D:b', 'C:a']);
    expect(p.remaining).toBe(8);
  });

  it('when an event is in the ledger or repeated in the batch, then it is a duplicate and changes nothing', () => {
    const p = planBatch({
      remaining: 10,
      events: [ev('D', 'a', 3), ev('D', 'b', 2), ev('D', 'b', 2)],
      settled: new Set(['D:a']),
      refused: new Set(),
    });
    expect(refs(p.apply)).toEqual(['D:b']);
    expect(refs(p.duplicates)).toEqual(['D:a', 'D:b']);
    expect(p.remaining).toBe(8);
  });

  it('when a deduction arrives before the compensation that made room for it, then it is settled after that compensation', () => {
    // Remaining 1: x was deducted and compensated on one shard, then y took the freed unit on another shard,
    // but y's shard was relayed first.
    const p = planBatch({
      remaining: 1,
      events: [ev('D', 'y', 1), ev('D', 'x', 1), ev('C', 'x', 1)],
      settled: new Set(),
      refused: new Set(),
    });
    expect(refs(p.apply).sort()).toEqual(['C:x', 'D:x', 'D:y']);
    expect(p.held).toEqual([]);
    expect(p.remaining).toBe(0);
  });

  it('when a deduction cannot be covered, then it is held, never applied below zero', () => {
    const p = planBatch({ remaining: 2, events: [ev('D', 'a', 2), ev('D', 'b', 1)], settled: new Set(), refused: new Set() });
    expect(refs(p.apply)).toEqual(['D:a']);
    expect(refs(p.held)).toEqual(['D:b']);
    expect(p.remaining).toBe(0);
  });

  it('when a compensation comes before its deduction is settled, then it waits; when its deduction was refused, then it settles nothing', () => {
    const p = planBatch({ remaining: 5, events: [ev('C', 'a', 1), ev('C', 'r', 2)], settled: new Set(), refused: new Set(['r']) });
    expect(refs(p.waiting)).toEqual(['C:a']);
    expect(refs(p.ofRefused)).toEqual(['C:r']);
    expect(p.apply).toEqual([]);
    expect(p.remaining).toBe(5);
  });

  it('for any batch, then the remaining never goes below zero, moves by exactly the applied events, and every event lands in one place', () => {
    const event = fc.record({
      kind: fc.constantFrom<'D' | 'C'>('D', 'C'),
      req: fc.integer({ min: 0, max: 12 }),
      q: fc.integer({ min: 1, max: 4 }),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 20 }),
        fc.array(event, { maxLength: 40 }),
        fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 5 }),
        (remaining, raw, settledReqs) => {
          // One quantity per request, as in reality.
          const events = raw.map((e) => ev(e.kind, `r${e.req}`, 1 + (e.req % 4)));
          const settled = new Set(settledReqs.map((r) => `D:r${r}`));
          const p = planBatch({ remaining, events, settled, refused: new Set() });
          expect(p.remaining).toBeGreaterThanOrEqual(0);
          const net = p.apply.reduce((n, x) => n + (x.event.kind === 'D' ? -x.event.quantity : x.event.quantity), 0);
          expect(p.remaining).toBe(remaining + net);
          expect(p.apply.length + p.duplicates.length + p.held.length + p.waiting.length + p.ofRefused.length).toBe(events.length);
          // A compensation is only ever settled together with, or after, its deduction.
          const applied = new Set(refs(p.apply));
          for (const x of p.apply)
            if (x.event.kind === 'C') expect(applied.has(`D:${x.event.requestId}`) || settled.has(`D:${x.event.requestId}`)).toBe(true);
        },
      ),
    );
  });
});
