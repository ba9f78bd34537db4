// What one batch of a coupon's events does to MySQL, decided without I/O: which events become ledger rows,
// the new settled remaining, which are repeats, and which must wait.
//
// Events reach settlement in relay order, not in the order Redis applied them across shards: a deduction
// served by units that a compensation on another shard freed can arrive before that compensation. So a
// deduction that does not fit the remaining is not refused on the spot: it is held, retried after the rest of
// the batch, and refused (an anomaly) only by the settler once nothing else of the coupon is in flight or it
// has been held for long enough. A compensation settles only after its deduction did.
import { ledgerKey } from '../../domain/ids.js';
import type { SettlementEvent } from '../event.js';

export interface Planned<T> {
  event: SettlementEvent;
  /** The caller's handle (the JetStream message). */
  ref: T;
}

export interface PlanInput<T> {
  remaining: number;
  /** In stream order. */
  events: Planned<T>[];
  /** Ledger keys (domain/ids.ts ledgerKey) already settled. */
  settled: ReadonlySet<string>;
  /** Request ids whose deduction was refused (an anomaly). */
  refused: ReadonlySet<string>;
}

export interface Plan<T> {
  remaining: number;
  /** New ledger rows. */
  apply: Planned<T>[];
  /** Already settled, or a repeat within the batch: acknowledge only. */
  duplicates: Planned<T>[];
  /** Deductions the remaining cannot cover now. */
  held: Planned<T>[];
  /** Compensations whose deduction has not settled yet. */
  waiting: Planned<T>[];
  /** Compensations of a refused deduction: nothing to settle (MySQL never applied the deduction, and Compensate put nothing back on sale). */
  ofRefused: Planned<T>[];
}

export function planBatch<T>(input: PlanInput<T>): Plan<T> {
  let remaining = input.remaining;
  const settled = new Set(input.settled);
  const seen = new Set<string>();
  const plan: Plan<T> = { remaining, apply: [], duplicates: [], held: [], waiting: [], ofRefused: [] };
  const held = new Map<string, Planned<T>>();
  let waiting: Planned<T>[] = [];

  const settle = (p: Planned<T>) => {
    plan.apply.push(p);
    settled.add(ledgerKey(p.event.kind, p.event.requestId));
  };

  for (const p of input.events) {
    const e = p.event;
    const k = ledgerKey(e.kind, e.requestId);
    if (settled.has(k) || seen.has(k)) {
      plan.duplicates.push(p);
      continue;
    }
    seen.add(k);
    if (e.kind === 'D') {
      if (remaining >= e.quantity) {
        remaining -= e.quantity;
        settle(p);
      } else {
        held.set(e.requestId, p);
      }
    } else if (settled.has(ledgerKey('D', e.requestId))) {
      remaining += e.quantity;
      settle(p);
    } else if (held.has(e.requestId)) {
      // The deduction and its compensation cancel out: both settle and the remaining does not move.
      settle(held.get(e.requestId)!);
      held.delete(e.requestId);
      settle(p);
    } else if (input.refused.has(e.requestId)) {
      plan.ofRefused.push(p);
    } else {
      waiting.push(p);
    }
  }

  // Compensations later in the batch may have made room; settle whatever now can, until nothing moves.
  for (let progress = true; progress; ) {
    progress = false;
    const stillWaiting: Planned<T>[] = [];
    for (const p of waiting) {
      if (settled.has(ledgerKey('D', p.event.requestId))) {
        remaining += p.event.quantity;
        settle(p);
        progress = true;
      } else {
        stillWaiting.push(p);
      }
    }
    waiting = stillWaiting;
    for (const [requestId, p] of held) {
      if (remaining >= p.event.quantity) {
        remaining -= p.event.quantity;
        settle(p);
        held.delete(requestId);
        progress = true;
      }
    }
  }

  plan.remaining = remaining;
  plan.held = [...held.values()];
  plan.waiting = waiting;
  return plan;
}
