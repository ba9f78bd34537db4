// OrderRecords on Redis Cluster: each order's record is one hash in its own slot (order-open-1.lua,
// order-move-1.lua, each sent again safely: a repeat answers the record as the first run left it); the
// sweeper's due-lists are a few sorted sets spread over the cluster.
import type { Cluster } from 'ioredis';
import { fnv1a } from '../domain/routing.js';
import type { OrderMoveResult, OrderOpenResult, OrderRecord, OrderRecords, OrderState } from '../domain/ports.js';
import { ORDER_DUE_LISTS, orderDueKey, orderKey } from './keys.js';
import { OneWriteSender } from './one-write.js';
import type { ReplicaAck } from './replica-ack.js';
import { Scripts } from './scripts.js';

export interface RedisOrderRecordsOptions {
  namespace: string;
  idempotencyWindowS: number;
  /** When set, a decision is answered (and followed) only once it reached a replica: a decision lost in a
   * failover could be decided the other way by a retry, after some items were already confirmed. */
  replicaAck?: ReplicaAck | undefined;
  fence?: { assertOpen(key: string): void } | undefined;
}

export class RedisOrderRecords implements OrderRecords {
  private readonly scripts: Scripts;
  /** The due-list each pass starts at, rotated so a busy list does not starve the others. */
  private nextList = 0;

  constructor(
    private readonly redis: Cluster,
    private readonly options: RedisOrderRecordsOptions,
  ) {
    this.scripts = new Scripts(redis, options.namespace, options.idempotencyWindowS);
    this.sender = new OneWriteSender(redis, options);
    this.sent = this.sender.sent;
  }

  /** Opens and moves go out as one write each, with their WAIT (one-write.ts). */
  private readonly sender: OneWriteSender;
  /** Those writes answered, those that met a redirect, those sent again as EVAL. */
  readonly sent: OneWriteSender['sent'];

  async open(spec: Pick<OrderRecord, 'orderId' | 'kind' | 'userId' | 'items' | 'ttlMs'>, nowMs: number): Promise<OrderOpenResult> {
    const key = orderKey(this.options.namespace, spec.orderId);
    const items = JSON.stringify(spec.items.map((i) => ({ couponId: i.couponId, quantity: i.quantity })));
    const sent = await this.sender.send(
      key,
      this.scripts.orderOpenCall(spec.orderId, { ...spec, items }, nowMs, this.options.idempotencyWindowS),
    );
    const r = sent.reply;
    if (r.kind === 'conflict') return { kind: 'conflict', field: r.field as 'kind' | 'user_id' | 'items', recorded: r.recorded };
    if (r.kind === 'created') {
      if (sent.ack) throw sent.ack;
      return {
        kind: 'created',
        record: {
          orderId: spec.orderId,
          kind: spec.kind,
          userId: spec.userId,
          items: spec.items,
          ttlMs: spec.ttlMs,
          state: 'pending',
          createdMs: nowMs,
        },
      };
    }
    await this.vouch(key, sent.node);
    return { kind: 'found', record: parseRecord(spec.orderId, r.fields) };
  }

  async move(
    orderId: string,
    from: OrderState[],
    to: OrderState,
    nowMs: number,
    opts: { notAfterMs?: number; set?: Partial<Pick<OrderRecord, 'expiresAtMs' | 'abort' | 'refused'>> } = {},
  ): Promise<OrderMoveResult> {
    const key = orderKey(this.options.namespace, orderId);
    const set: (string | number)[] = [];
    const s = opts.set ?? {};
    if (s.expiresAtMs !== undefined) set.push('x', s.expiresAtMs);
    if (s.abort !== undefined) set.push('ab', s.abort);
    if (s.refused !== undefined) set.push('rf', JSON.stringify(s.refused));
    const sent = await this.sender.send(key, this.scripts.orderMoveCall(orderId, from, to, nowMs, opts.notAfterMs ?? 0, set));
    const r = sent.reply;
    if (r.kind === 'missing') return r;
    const record = parseRecord(orderId, r.fields);
    if (r.kind === 'moved') {
      // The WAIT went out in the script's own write (one-write.ts).
      if (sent.ack) throw sent.ack;
      return { kind: 'moved', record };
    }
    // Someone else's decision is followed only once it is as durable as our own would have been.
    await this.vouch(key, sent.node);
    return { kind: r.kind, record };
  }

  async read(orderId: string): Promise<OrderRecord | null> {
    const flat = await this.redis.hgetall(orderKey(this.options.namespace, orderId));
    if (!flat || flat.st === undefined) return null;
    return parseRecord(orderId, Object.entries(flat).flat());
  }

  async schedule(orderId: string, atMs: number): Promise<void> {
    await this.redis.zadd(this.dueKey(orderId), Math.round(atMs), orderId);
  }

  async unschedule(orderId: string): Promise<void> {
    await this.redis.zrem(this.dueKey(orderId), orderId);
  }

  async due(nowMs: number, limit: number): Promise<string[]> {
    const start = this.nextList;
    this.nextList = (this.nextList + 1) % ORDER_DUE_LISTS;
    const lists = await Promise.all(
      Array.from({ length: ORDER_DUE_LISTS }, (_, i) =>
        this.redis.zrangebyscore(orderDueKey(this.options.namespace, (start + i) % ORDER_DUE_LISTS), '-inf', nowMs, 'LIMIT', 0, limit),
      ),
    );
    return lists.flat();
  }

  private dueKey(orderId: string): string {
    return orderDueKey(this.options.namespace, fnv1a(orderId) % ORDER_DUE_LISTS);
  }

  private async replicated(key: string, owner: string | undefined): Promise<void> {
    if (this.options.replicaAck) await this.options.replicaAck.afterWrite(key, owner);
  }

  /** A tiny write to the record's own slot, then the shared WAIT: the decision read is on a replica too. */
  private async vouch(key: string, owner: string | undefined): Promise<void> {
    if (!this.options.replicaAck) return;
    await this.redis.hset(key, 'v', Date.now());
    await this.replicated(key, owner);
  }
}

const STATES = new Set<OrderState>(['pending', 'held', 'committed', 'confirmed', 'aborted', 'compensated']);

function parseRecord(orderId: string, flat: string[]): OrderRecord {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) f.set(String(flat[i]), String(flat[i + 1]));
  const state = f.get('st') as OrderState;
  if (!STATES.has(state)) throw new Error(`order ${orderId}: unknown state ${JSON.stringify(state)}`);
  const num = (k: string) => (f.has(k) ? Number(f.get(k)) : undefined);
  const record: OrderRecord = {
    orderId,
    kind: f.get('k') === 'reserve' ? 'reserve' : 'deduct',
    userId: f.get('u') ?? '',
    items: JSON.parse(f.get('it') ?? '[]'),
    ttlMs: num('t') ?? 0,
    state,
    createdMs: num('c') ?? 0,
  };
  const decidedMs = num('dm');
  if (decidedMs !== undefined) record.decidedMs = decidedMs;
  const expiresAtMs = num('x');
  if (expiresAtMs !== undefined) record.expiresAtMs = expiresAtMs;
  if (f.has('ab')) record.abort = f.get('ab') as OrderRecord['abort'] & string;
  if (f.has('rf')) record.refused = JSON.parse(f.get('rf')!);
  return record;
}
