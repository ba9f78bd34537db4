// shardstock coupon create|get|restock|window|pause|resume
import { randomUUID } from 'node:crypto';
import type { RunFn } from '../command.js';
import { COUPON_HELP as HELP } from '../help.js';
import { UsageError } from '../errors.js';
import { println, type Io } from '../io.js';
import { printLevel } from '../level-view.js';
import { flag, int, noMorePositionals, parse, positional, str, type OptionSpec, type Parsed } from '../options.js';
import { plainCoupon, plainLevel, plainSale, saleRows } from '../plain.js';
import { timestampFromMs, type Timestamp } from '@bufbuild/protobuf/wkt';
import { json, keyValues } from '../render.js';
import { openSession } from '../session.js';

const OPTIONS: OptionSpec = {
  stock: { type: 'string' },
  shards: { type: 'string' },
  'per-user-limit': { type: 'string' },
  quantity: { type: 'string' },
  'request-id': { type: 'string' },
  'starts-at': { type: 'string' },
  'ends-at': { type: 'string' },
  reason: { type: 'string' },
};

async function create(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const totalStock = BigInt(int(p, 'stock', undefined, 0, Number.MAX_SAFE_INTEGER));
  const shardCount = int(p, 'shards', 0, 0, 1024);
  const perUserLimit = int(p, 'per-user-limit', 0, 0, 2 ** 31 - 1);
  const window = { startsAt: time(p, 'starts-at'), endsAt: time(p, 'ends-at') };
  const s = openSession(p, io);
  try {
    const r = await s.call('CreateCoupon', (o) => s.client.createCoupon({ couponId, totalStock, shardCount, perUserLimit, ...window }, o));
    const coupon = plainCoupon(r.coupon);
    if (s.json) json(io.stdout, { created: r.created, coupon });
    else {
      println(
        io.stdout,
        r.created
          ? `created coupon ${coupon.couponId}`
          : `coupon ${coupon.couponId} already existed with this definition (nothing changed)`,
      );
      keyValues(io.stdout, [
        ['total stock', coupon.totalStock],
        ['shards', coupon.shardCount],
        ['per-user limit', coupon.perUserLimit || 'unlimited'],
        ['created at', coupon.createdAt],
        ...saleRows(coupon.sale),
      ]);
    }
    return 0;
  } finally {
    s.close();
  }
}

async function get(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, { shards: { type: 'boolean' } });
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const s = openSession(p, io);
  try {
    const r = await s.call('GetStock', (o) => s.client.getStock({ couponId, includeShards: flag(p, 'shards') }, o));
    const level = plainLevel(r.level);
    if (s.json) json(io.stdout, level);
    else printLevel(io.stdout, level);
    return 0;
  } finally {
    s.close();
  }
}

async function restock(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const quantity = BigInt(int(p, 'quantity', undefined, 1, Number.MAX_SAFE_INTEGER));
  const requestId = str(p, 'request-id') ?? `restock-${randomUUID()}`;
  const s = openSession(p, io);
  try {
    const r = await s
      .call('Restock', (o) => s.client.restock({ couponId, quantity, requestId }, o))
      .catch((err: Error) => {
        // The one thing an operator needs after a failed restock is the id to retry it with.
        err.message += ` (request id ${requestId}: retry with --request-id ${requestId})`;
        throw err;
      });
    const level = plainLevel(r.level);
    if (s.json) json(io.stdout, { requestId, replayed: r.replayed, level });
    else {
      println(
        io.stdout,
        r.replayed ? `restock ${requestId} was already applied (nothing added)` : `restocked ${quantity} units (request id ${requestId})`,
      );
      printLevel(io.stdout, level);
    }
    return 0;
  } finally {
    s.close();
  }
}

async function window(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const req = { couponId, startsAt: time(p, 'starts-at'), endsAt: time(p, 'ends-at'), reason: str(p, 'reason') ?? '' };
  const s = openSession(p, io);
  try {
    const r = await s.call('SetSaleWindow', (o) => s.client.setSaleWindow(req, o));
    return printSale(io, s.json, `sale window of ${couponId} set`, plainSale(r.sale));
  } finally {
    s.close();
  }
}

const pauseOrResume =
  (pause: boolean) =>
  async (argv: string[], io: Io): Promise<number> => {
    const p = parse(argv, OPTIONS);
    const couponId = positional(p, 0, 'coupon-id');
    noMorePositionals(p, 1);
    const req = { couponId, reason: str(p, 'reason') ?? '' };
    const s = openSession(p, io);
    try {
      const r = pause
        ? await s.call('PauseSale', (o) => s.client.pauseSale(req, o))
        : await s.call('ResumeSale', (o) => s.client.resumeSale(req, o));
      const what = pause ? 'paused' : 'resumed';
      return printSale(
        io,
        s.json,
        r.changed ? `sale of ${couponId} ${what}` : `sale of ${couponId} was already ${what} (nothing changed)`,
        {
          ...plainSale(r.sale),
          changed: r.changed,
        },
      );
    } finally {
      s.close();
    }
  };

function printSale(io: Io, asJson: boolean, line: string, sale: ReturnType<typeof plainSale> & { changed?: boolean }): number {
  if (asJson) json(io.stdout, sale);
  else {
    println(io.stdout, line);
    keyValues(io.stdout, saleRows(sale));
  }
  return 0;
}

/** --starts-at / --ends-at as a Timestamp; undefined when not given. */
function time(p: Parsed, name: string): Timestamp | undefined {
  const raw = str(p, name);
  if (raw === undefined) return undefined;
  const ms = Date.parse(raw);
  if (Number.isNaN(ms)) throw new UsageError(`--${name} ${JSON.stringify(raw)}: not a time (use ISO 8601, e.g. 2030-01-01T10:00:00Z)`);
  return timestampFromMs(ms);
}

const SUB: Record<string, (argv: string[], io: Io) => Promise<number>> = {
  create,
  get,
  restock,
  window,
  pause: pauseOrResume(true),
  resume: pauseOrResume(false),
};

export const run: RunFn = async (argv, io) => {
  const [sub, ...rest] = argv;
  if (sub === undefined) throw new UsageError('missing subcommand: create, get, restock, window, pause or resume');
  if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    println(io.stdout, HELP);
    return 0;
  }
  const fn = SUB[sub];
  if (!fn) throw new UsageError(`unknown subcommand coupon ${JSON.stringify(sub)} (create, get, restock, window, pause, resume)`);
  return fn(rest, io);
};
