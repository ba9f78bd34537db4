// shardstock compensate: gives back the units of one earlier deduction.
import type { RunFn } from '../command.js';
import { EXIT } from '../errors.js';
import { println } from '../io.js';
import { noMorePositionals, parse, positional, str } from '../options.js';
import { compensateOutcomeName } from '../plain.js';
import { json, keyValues } from '../render.js';
import { openSession } from '../session.js';

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, { reason: { type: 'string' } });
  const couponId = positional(p, 0, 'coupon-id');
  const requestId = positional(p, 1, 'request-id');
  noMorePositionals(p, 2);
  const s = openSession(p, io);
  try {
    const r = await s.call('Compensate', (o) =>
      s.client.compensate({ couponId, requestId, reason: str(p, 'reason') ?? 'shardstock cli' }, o),
    );
    const outcome = compensateOutcomeName(r.outcome);
    if (s.json) json(io.stdout, { couponId, requestId, outcome, remaining: Number(r.remaining) });
    else {
      println(io.stdout, outcome.toUpperCase());
      keyValues(io.stdout, [
        ['coupon', couponId],
        ['request id', requestId],
        ['shard remaining', Number(r.remaining)],
      ]);
    }
    return outcome === 'not_deducted' ? EXIT.refused : EXIT.ok;
  } finally {
    s.close();
  }
};
