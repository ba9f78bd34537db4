// shardstock order: one all-or-nothing order of several coupons (DeductOrder, or ReserveOrder with --reserve),
// or a step on an existing order: --confirm / --release / --extend / --compensate <order-id>.
import { randomUUID } from 'node:crypto';
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { RunFn } from '../command.js';
import { EXIT, UsageError } from '../errors.js';
import { println, type Io } from '../io.js';
import { flag, int, parse, str, type OptionSpec } from '../options.js';
import { json, keyValues, table } from '../render.js';
import { openSession, type Session } from '../session.js';
import {
  CompensateOutcomeSchema,
  ConfirmOutcomeSchema,
  ExtendOutcomeSchema,
  HoldStateSchema,
  ItemRefusalReasonSchema,
  OrderOutcomeSchema,
  ReleaseOutcomeSchema,
  type ItemRefusal,
  type OrderItemResult,
} from '../../gen/inventory/v1/inventory_pb.js';
import { enumValueName } from '../../protocol/enum-names.js';
import type { DescEnum } from '@bufbuild/protobuf';

const OPTIONS: OptionSpec = {
  reserve: { type: 'boolean' },
  ttl: { type: 'string' },
  user: { type: 'string' },
  'request-id': { type: 'string' },
  reason: { type: 'string' },
  confirm: { type: 'string' },
  release: { type: 'string' },
  extend: { type: 'string' },
  compensate: { type: 'string' },
};

const name = (desc: DescEnum, v: number) => enumValueName(desc, v) ?? `unknown(${v})`;
const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);

/** The --json shape of one item: numbers, lowercase names, ISO times. */
function plainItem(i: OrderItemResult) {
  return {
    index: i.itemIndex,
    couponId: i.couponId,
    quantity: Number(i.quantity),
    shard: i.shard,
    holdId: i.hold?.holdId ?? null,
    requestId: i.hold?.requestId ?? null,
    state: i.hold ? name(HoldStateSchema, i.hold.state) : null,
    expiresAt: iso(i.hold?.expiresAt),
    ...(i.compensateOutcome ? { compensate: name(CompensateOutcomeSchema, i.compensateOutcome) } : {}),
  };
}

function plainRefusal(r: ItemRefusal | undefined) {
  return r ? { index: r.itemIndex, couponId: r.couponId, reason: name(ItemRefusalReasonSchema, r.reason) } : null;
}

/** `coupon=Q` (Q defaults to 1); `=` cannot appear in a coupon id. */
function parseItem(arg: string): { couponId: string; quantity: bigint } {
  const m = /^([^=]+)(?:=(\d{1,7}))?$/.exec(arg);
  if (!m) throw new UsageError(`an item is <coupon-id>[=<quantity>], got ${JSON.stringify(arg)}`);
  return { couponId: m[1]!, quantity: BigInt(m[2] ?? '1') };
}

function print(s: Session, io: Io, result: Record<string, unknown> & { outcome: string; items: ReturnType<typeof plainItem>[] }): void {
  if (s.json) {
    json(io.stdout, result);
    return;
  }
  println(io.stdout, `${result.outcome.toUpperCase()}${result.replayed ? ' (replay of an earlier call)' : ''}`);
  const refusal = result.refusal as ReturnType<typeof plainRefusal> | undefined;
  keyValues(io.stdout, [
    ['order id', String(result.orderId)],
    ...(refusal ? ([['refused', `item ${refusal.index} (${refusal.couponId}): ${refusal.reason}`]] as [string, string][]) : []),
    ...(result.expiresAt ? ([['expires at', String(result.expiresAt)]] as [string, string][]) : []),
  ]);
  if (result.items.length > 0) {
    println(io.stdout);
    table(
      io.stdout,
      ['item', 'coupon', 'quantity', 'shard', 'hold', 'expires at'],
      result.items.map((i) => [i.index, i.couponId, i.quantity, i.shard, i.state ?? '-', i.expiresAt ?? '-']),
    );
  }
}

async function place(s: Session, io: Io, p: ReturnType<typeof parse>): Promise<number> {
  if (p.positionals.length === 0) throw new UsageError('missing <coupon-id>[=<quantity>] (one per item)');
  const items = p.positionals.map(parseItem);
  const reserve = flag(p, 'reserve');
  const req = {
    requestId: str(p, 'request-id') ?? `cli-order-${randomUUID()}`,
    userId: str(p, 'user') ?? '',
    items,
    ttlMs: int(p, 'ttl', 0, 0, 2_147_483_647),
  };
  const r = reserve
    ? await s.call('ReserveOrder', (o) => s.client.reserveOrder(req, o))
    : await s.call('DeductOrder', (o) => s.client.deductOrder(req, o));
  const outcome = name(OrderOutcomeSchema, r.outcome);
  print(s, io, {
    orderId: r.orderId,
    outcome,
    replayed: r.replayed,
    refusal: plainRefusal(r.refusal),
    ...('expiresAt' in r ? { expiresAt: iso(r.expiresAt) } : {}),
    items: r.items.map(plainItem),
    attempts: r.attempts,
  });
  return outcome === 'reserved' || outcome === 'deducted' ? EXIT.ok : EXIT.refused;
}

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, OPTIONS);
  const steps = (['confirm', 'release', 'extend', 'compensate'] as const).filter((k) => str(p, k) !== undefined);
  if (steps.length > 1) throw new UsageError(`--${steps[0]} and --${steps[1]} cannot be combined`);
  const step = steps[0];
  if (step && p.positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(p.positionals[0])} with --${step}`);
  const s = openSession(p, io);
  try {
    if (!step) return await place(s, io, p);
    const orderId = str(p, step)!;
    const reason = str(p, 'reason') ?? 'shardstock cli';
    let outcome: string;
    let items: OrderItemResult[];
    let ok: string[];
    if (step === 'confirm') {
      const r = await s.call('Confirm', (o) => s.client.confirm({ target: { case: 'orderId', value: orderId } }, o));
      outcome = name(ConfirmOutcomeSchema, r.outcome);
      items = r.items;
      ok = ['confirmed'];
    } else if (step === 'release') {
      const r = await s.call('Release', (o) => s.client.release({ target: { case: 'orderId', value: orderId }, reason }, o));
      outcome = name(ReleaseOutcomeSchema, r.outcome);
      items = r.items;
      ok = ['released', 'already_released', 'expired'];
    } else if (step === 'extend') {
      const ttlMs = int(p, 'ttl', 0, 0, 2_147_483_647);
      const r = await s.call('ExtendHold', (o) => s.client.extendHold({ target: { case: 'orderId', value: orderId }, ttlMs }, o));
      outcome = name(ExtendOutcomeSchema, r.outcome);
      items = r.items;
      ok = ['extended'];
    } else {
      const r = await s.call('Compensate', (o) => s.client.compensate({ couponId: '', requestId: '', orderId, reason }, o));
      outcome = name(CompensateOutcomeSchema, r.outcome);
      items = r.items;
      ok = ['compensated', 'already_compensated'];
    }
    print(s, io, { orderId, outcome, items: items.map(plainItem) });
    return ok.includes(outcome) ? EXIT.ok : EXIT.refused;
  } finally {
    s.close();
  }
};
