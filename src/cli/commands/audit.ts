// shardstock audit deduction|ledger|anomalies: the audit API (admin role).
import { timestampFromMs, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { RunFn } from '../command.js';
import { AUDIT_HELP as HELP } from '../help.js';
import { UsageError } from '../errors.js';
import { println, type Io } from '../io.js';
import { flag, int, noMorePositionals, parse, positional, str, type OptionSpec, type Parsed } from '../options.js';
import { plainAnomaly, plainDeduction, plainLedgerEntry } from '../plain-audit.js';
import { json, keyValues, table } from '../render.js';
import { openSession } from '../session.js';
import { LedgerKind } from '../../gen/inventory/v1/inventory_pb.js';

const OPTIONS: OptionSpec = {
  kind: { type: 'string' },
  user: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  'page-size': { type: 'string' },
  'page-token': { type: 'string' },
  all: { type: 'boolean' },
};

async function deduction(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  const requestId = positional(p, 1, 'request-id');
  noMorePositionals(p, 2);
  const s = openSession(p, io);
  try {
    const r = plainDeduction(await s.call('GetDeduction', (o) => s.client.getDeduction({ couponId, requestId }, o)));
    if (s.json) json(io.stdout, r);
    else {
      println(io.stdout, `${couponId} ${requestId}: ${r.state.toUpperCase()}${r.settled ? ' (settled in MySQL)' : ''}`);
      keyValues(io.stdout, [
        [
          'redis record',
          r.redis
            ? `shard ${r.redis.shard}, ${r.redis.quantity} units at ${r.redis.deductedAt}${r.redis.compensated ? ', compensated' : ''}${r.redis.refused ? ', refused by MySQL' : ''}`
            : 'none (never deducted, or expired)',
        ],
        ['in flight', r.inFlight.map((e) => `${e.kind} ${e.quantity} in ${e.seenIn.join('+')}`).join('; ') || 'nothing'],
        ['ledger', r.ledger.map((l) => `${l.kind} ${l.quantity} settled ${l.settledAt}`).join('; ') || 'no rows'],
        ['anomalies', r.anomalies.map((a) => `${a.kind} ${a.reason}`).join('; ') || 'none'],
        ['checked at', r.checkedAt],
      ]);
    }
    return 0;
  } finally {
    s.close();
  }
}

async function ledger(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const kinds = (str(p, 'kind') ?? '')
    .split(',')
    .filter(Boolean)
    .map((k) => {
      const v = LedgerKind[k.toUpperCase() as keyof typeof LedgerKind];
      if (v === undefined || v === LedgerKind.UNSPECIFIED) throw new UsageError(`--kind ${k}: not a ledger kind`);
      return v;
    });
  const req = {
    couponId,
    kinds,
    userId: str(p, 'user') ?? '',
    since: time(p, 'since'),
    until: time(p, 'until'),
    pageSize: int(p, 'page-size', 0, 0, 1000),
  };
  const s = openSession(p, io);
  try {
    let pageToken = str(p, 'page-token') ?? '';
    const rows: ReturnType<typeof plainLedgerEntry>[] = [];
    do {
      const r = await s.call('ListLedger', (o) => s.client.listLedger({ ...req, pageToken }, o));
      rows.push(...r.entries.map(plainLedgerEntry));
      pageToken = r.nextPageToken;
    } while (pageToken && flag(p, 'all'));
    if (s.json) json(io.stdout, { entries: rows, nextPageToken: pageToken });
    else {
      table(
        io.stdout,
        ['id', 'kind', 'request', 'qty', 'user', 'shard', 'occurred at', 'reason'],
        rows.map((e) => [e.id, e.kind, e.requestId, e.quantity, e.userId, e.shard < 0 ? '' : e.shard, e.occurredAt, e.reason]),
      );
      if (pageToken) println(io.stdout, `more: --page-token ${pageToken} (or --all)`);
    }
    return 0;
  } finally {
    s.close();
  }
}

async function anomalies(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = p.positionals[0] ?? '';
  noMorePositionals(p, 1);
  const s = openSession(p, io);
  try {
    let pageToken = str(p, 'page-token') ?? '';
    const rows: ReturnType<typeof plainAnomaly>[] = [];
    do {
      const r = await s.call('ListAnomalies', (o) =>
        s.client.listAnomalies({ couponId, pageToken, pageSize: int(p, 'page-size', 0, 0, 1000) }, o),
      );
      rows.push(...r.anomalies.map(plainAnomaly));
      pageToken = r.nextPageToken;
    } while (pageToken && flag(p, 'all'));
    if (s.json) json(io.stdout, { anomalies: rows, nextPageToken: pageToken });
    else {
      table(
        io.stdout,
        ['id', 'coupon', 'request', 'kind', 'qty', 'reason', 'refunded', 'at'],
        rows.map((a) => [a.id, a.couponId, a.requestId, a.kind, a.quantity, a.reason, a.refunded, a.createdAt]),
      );
      if (pageToken) println(io.stdout, `more: --page-token ${pageToken} (or --all)`);
    }
    return 0;
  } finally {
    s.close();
  }
}

function time(p: Parsed, name: string): Timestamp | undefined {
  const raw = str(p, name);
  if (raw === undefined) return undefined;
  const ms = Date.parse(raw);
  if (Number.isNaN(ms)) throw new UsageError(`--${name} ${JSON.stringify(raw)}: not a time (use ISO 8601, e.g. 2030-01-01T10:00:00Z)`);
  return timestampFromMs(ms);
}

const SUB: Record<string, (argv: string[], io: Io) => Promise<number>> = { deduction, ledger, anomalies };

export const run: RunFn = async (argv, io) => {
  const [sub, ...rest] = argv;
  if (sub === undefined) throw new UsageError('missing subcommand: deduction, ledger or anomalies');
  if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    println(io.stdout, HELP);
    return 0;
  }
  const fn = SUB[sub];
  if (!fn) throw new UsageError(`unknown subcommand audit ${JSON.stringify(sub)} (deduction, ledger, anomalies)`);
  return fn(rest, io);
};
