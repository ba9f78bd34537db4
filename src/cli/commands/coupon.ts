// shardstock coupon create|get|restock
import { randomUUID } from 'node:crypto';
import type { RunFn } from '../command.js';
import { COUPON_HELP as HELP } from '../help.js';
import { UsageError } from '../errors.js';
import { println, type Io } from '../io.js';
import { printLevel } from '../level-view.js';
import { flag, int, noMorePositionals, parse, positional, str, type OptionSpec } from '../options.js';
import { plainCoupon, plainLevel } from '../plain.js';
import { json, keyValues } from '../render.js';
import { openSession } from '../session.js';

const OPTIONS: OptionSpec = {
  stock: { type: 'string' },
  shards: { type: 'string' },
  'per-user-limit': { type: 'string' },
  quantity: { type: 'string' },
  'request-id': { type: 'string' },
};

async function create(argv: string[], io: Io): Promise<number> {
  const p = parse(argv, OPTIONS);
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const totalStock = BigInt(int(p, 'stock', undefined, 0, Number.MAX_SAFE_INTEGER));
  const shardCount = int(p, 'shards', 0, 0, 1024);
  const perUserLimit = int(p, 'per-user-limit', 0, 0, 2 ** 31 - 1);
  const s = openSession(p, io);
  try {
    const r = await s.call('CreateCoupon', (o) => s.client.createCoupon({ couponId, totalStock, shardCount, perUserLimit }, o));
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

const SUB: Record<string, (argv: string[], io: Io) => Promise<number>> = { create, get, restock };

export const run: RunFn = async (argv, io) => {
  const [sub, ...rest] = argv;
  if (sub === undefined) throw new UsageError('missing subcommand: create, get or restock');
  if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    println(io.stdout, HELP);
    return 0;
  }
  const fn = SUB[sub];
  if (!fn) throw new UsageError(`unknown subcommand coupon ${JSON.stringify(sub)} (create, get, restock)`);
  return fn(rest, io);
};
