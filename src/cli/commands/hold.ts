// shardstock reserve | confirm | release | extend: one hold at a time (Reserve, Confirm, Release, ExtendHold).
import { randomUUID } from 'node:crypto';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  ConfirmOutcomeSchema,
  ExtendOutcomeSchema,
  type Hold,
  HoldStateSchema,
  ReleaseOutcomeSchema,
  ReserveOutcomeSchema,
} from '../../gen/inventory/v1/inventory_pb.js';
import { enumValueName } from '../../protocol/enum-names.js';
import type { RunFn } from '../command.js';
import { EXIT } from '../errors.js';
import { println, type Io } from '../io.js';
import { int, noMorePositionals, parse, positional, str } from '../options.js';
import { json, keyValues } from '../render.js';
import { openSession, type Session } from '../session.js';

/** A hold as --json prints it: numbers, lowercase state, ISO expiry. */
export function plainHold(h: Hold | undefined) {
  if (!h) return null;
  return {
    holdId: h.holdId,
    couponId: h.couponId,
    requestId: h.requestId,
    userId: h.userId,
    quantity: Number(h.quantity),
    confirmed: Number(h.confirmed),
    shard: h.shard,
    expiresAt: h.expiresAt ? timestampDate(h.expiresAt).toISOString() : null,
    state: enumValueName(HoldStateSchema, h.state) ?? 'unknown',
  };
}

function print(s: Session, io: Io, result: Record<string, unknown> & { outcome: string; hold: ReturnType<typeof plainHold> }): void {
  if (s.json) {
    json(io.stdout, result);
    return;
  }
  println(io.stdout, `${result.outcome.toUpperCase()}${result.replayed ? ' (replay of an earlier call)' : ''}`);
  const h = result.hold;
  if (!h) return;
  const rows: [string, unknown][] = [
    ['hold id', h.holdId],
    ['state', h.state],
    ['quantity', h.quantity],
    ['expires at', h.expiresAt],
  ];
  if (h.state === 'confirmed') rows.push(['confirmed', h.confirmed]);
  if (typeof result.released === 'number' && result.released > 0) rows.push(['released', result.released]);
  keyValues(io.stdout, rows);
}

const withSession = async (
  argv: string[],
  io: Io,
  spec: Parameters<typeof parse>[1],
  body: (p: ReturnType<typeof parse>, s: Session) => Promise<number>,
) => {
  const p = parse(argv, spec);
  const s = openSession(p, io);
  try {
    return await body(p, s);
  } finally {
    s.close();
  }
};

export const reserve: RunFn = (argv, io) =>
  withSession(
    argv,
    io,
    { quantity: { type: 'string' }, user: { type: 'string' }, 'request-id': { type: 'string' }, ttl: { type: 'string' } },
    async (p, s) => {
      const couponId = positional(p, 0, 'coupon-id');
      noMorePositionals(p, 1);
      const req = {
        couponId,
        requestId: str(p, 'request-id') ?? `cli-${randomUUID()}`,
        userId: str(p, 'user') ?? '',
        quantity: BigInt(int(p, 'quantity', 1, 1, 1_000_000)),
        ttlMs: int(p, 'ttl', 0, 0, 2_000_000_000),
      };
      const r = await s.call('Reserve', (o) => s.client.reserve(req, o));
      const outcome = enumValueName(ReserveOutcomeSchema, r.outcome) ?? 'unknown';
      print(s, io, {
        couponId,
        requestId: r.requestId,
        outcome,
        replayed: r.replayed,
        remaining: Number(r.remaining),
        shard: r.shard,
        hold: plainHold(r.hold),
      });
      return outcome === 'held' ? EXIT.ok : EXIT.refused;
    },
  );

export const confirm: RunFn = (argv, io) =>
  withSession(argv, io, { quantity: { type: 'string' } }, async (p, s) => {
    const holdId = positional(p, 0, 'hold-id');
    noMorePositionals(p, 1);
    const quantity = BigInt(int(p, 'quantity', 0, 0, 1_000_000));
    const r = await s.call('Confirm', (o) => s.client.confirm({ target: { case: 'holdId', value: holdId }, quantity }, o));
    const outcome = enumValueName(ConfirmOutcomeSchema, r.outcome) ?? 'unknown';
    print(s, io, { holdId, outcome, replayed: r.replayed, released: Number(r.released), hold: plainHold(r.hold) });
    return outcome === 'confirmed' ? EXIT.ok : EXIT.refused;
  });

export const release: RunFn = (argv, io) =>
  withSession(argv, io, { reason: { type: 'string' } }, async (p, s) => {
    const holdId = positional(p, 0, 'hold-id');
    noMorePositionals(p, 1);
    const r = await s.call('Release', (o) =>
      s.client.release({ target: { case: 'holdId', value: holdId }, reason: str(p, 'reason') ?? 'shardstock cli' }, o),
    );
    const outcome = enumValueName(ReleaseOutcomeSchema, r.outcome) ?? 'unknown';
    print(s, io, { holdId, outcome, released: Number(r.released), hold: plainHold(r.hold) });
    return outcome === 'released' || outcome === 'already_released' ? EXIT.ok : EXIT.refused;
  });

export const extend: RunFn = (argv, io) =>
  withSession(argv, io, { ttl: { type: 'string' } }, async (p, s) => {
    const holdId = positional(p, 0, 'hold-id');
    noMorePositionals(p, 1);
    const ttlMs = int(p, 'ttl', 0, 0, 2_000_000_000);
    const r = await s.call('ExtendHold', (o) => s.client.extendHold({ target: { case: 'holdId', value: holdId }, ttlMs }, o));
    const outcome = enumValueName(ExtendOutcomeSchema, r.outcome) ?? 'unknown';
    print(s, io, { holdId, outcome, hold: plainHold(r.hold) });
    return outcome === 'extended' ? EXIT.ok : EXIT.refused;
  });
