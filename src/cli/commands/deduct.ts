// shardstock deduct: one deduction, or a load run with a progress bar (--count N --concurrency C).
import { randomBytes, randomUUID } from 'node:crypto';
import type { RunFn } from '../command.js';
import { EXIT } from '../errors.js';
import { println, type Io } from '../io.js';
import { runLoad, type LoadSummary } from '../load.js';
import { flag, int, noMorePositionals, parse, positional, str, type OptionSpec } from '../options.js';
import { deductOutcomeName } from '../plain.js';
import { ProgressBar } from '../progress.js';
import { fmt, json, keyValues, table } from '../render.js';
import { openSession, type Session } from '../session.js';

const OPTIONS: OptionSpec = {
  quantity: { type: 'string' },
  user: { type: 'string' },
  users: { type: 'string' },
  'request-id': { type: 'string' },
  count: { type: 'string' },
  concurrency: { type: 'string' },
  prefix: { type: 'string' },
  'allow-partial': { type: 'boolean' },
};

async function single(
  s: Session,
  io: Io,
  couponId: string,
  quantity: bigint,
  userId: string,
  requestId: string,
  allowPartial: boolean,
): Promise<number> {
  const r = await s.call('Deduct', (o) => s.client.deduct({ couponId, requestId, userId, quantity, allowPartial }, o));
  const outcome = deductOutcomeName(r.outcome);
  const result = {
    couponId,
    requestId: r.requestId,
    outcome,
    replayed: r.replayed,
    remaining: Number(r.remaining),
    shard: r.shard,
    granted: Number(r.granted),
    attempts: r.attempts,
  };
  if (s.json) json(io.stdout, result);
  else {
    println(io.stdout, `${outcome.toUpperCase()}${r.replayed ? ' (replay of an earlier call)' : ''}`);
    keyValues(io.stdout, [
      ['coupon', couponId],
      ['request id', requestId],
      ['quantity', Number(quantity)],
      ['granted', result.granted],
      ['shard', r.shard],
      ['shard remaining', result.remaining],
    ]);
  }
  return outcome === 'deducted' ? EXIT.ok : EXIT.refused;
}

function printSummary(io: Io, s: LoadSummary): void {
  const rows: unknown[][] = [
    ...Object.entries(s.outcomes).map(([k, v]) => [k, v]),
    ...Object.entries(s.errors).map(([k, v]) => [`error ${k}`, v]),
  ];
  table(io.stdout, ['outcome', 'calls'], rows);
  println(io.stdout);
  keyValues(io.stdout, [
    ['calls', `${fmt(s.completed)} of ${fmt(s.count)}`],
    ['concurrency', s.concurrency],
    ['elapsed', `${fmt(s.elapsedMs)} ms`],
    ['rate', `${fmt(s.ratePerS)} calls/s`],
    ['latency p50/p90/p99/max', `${s.latencyMs.p50} / ${s.latencyMs.p90} / ${s.latencyMs.p99} / ${s.latencyMs.max} ms`],
  ]);
  for (const [code, msg] of Object.entries(s.firstErrors)) println(io.stderr, `first ${code}: ${msg}`);
}

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const quantity = BigInt(int(p, 'quantity', 1, 1, 1_000_000));
  const s = openSession(p, io);
  try {
    if (str(p, 'count') === undefined) {
      return await single(
        s,
        io,
        couponId,
        quantity,
        str(p, 'user') ?? '',
        str(p, 'request-id') ?? `cli-${randomUUID()}`,
        flag(p, 'allow-partial'),
      );
    }
    const count = int(p, 'count', undefined, 1, 100_000_000);
    const concurrency = int(p, 'concurrency', 32, 1, 10_000);
    const prefix = str(p, 'prefix') ?? `load-${randomBytes(4).toString('hex')}`;
    const fixedUser = str(p, 'user');
    const users = int(p, 'users', 0, 0, 100_000_000);
    const userOf = (i: number) => fixedUser ?? (users > 0 ? `user-${i % users}` : `user-${i}`);
    const bar = new ProgressBar(io.stderr, count, 'deduct');
    const summary = await runLoad(
      async (i) => {
        const r = await s.client.deduct({ couponId, requestId: `${prefix}-${i}`, userId: userOf(i), quantity }, s.options());
        return deductOutcomeName(r.outcome);
      },
      { count, concurrency, signal: io.signal, onProgress: (done) => bar.update(done) },
    );
    bar.done();
    if (s.json) json(io.stdout, { couponId, prefix, ...summary });
    else printSummary(io, summary);
    return Object.keys(summary.errors).length === 0 && summary.completed === count ? EXIT.ok : EXIT.failure;
  } finally {
    s.close();
  }
};
