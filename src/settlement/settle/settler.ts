// Settler: JetStream -> MySQL. A durable pull consumer with explicit acks; each fetched batch is grouped by
// coupon and each coupon's part is applied in ONE transaction (ledger-store.ts). A message is acked only after
// the transaction that settled it committed, so a crash at any point leaves it to be delivered again, and the
// ledger's unique key turns that second delivery into a no-op.
//
// Deductions MySQL cannot cover are held (redelivered with a delay) while anything else of the coupon is still
// in flight, then refused: an anomaly row, the deduction marked refused in Redis (its units stay sold: the
// record never had them, so putting them back on sale would sell them twice), a repair of the coupon asked
// for (a refusal means Redis held more than the bound), and only then the ack.
// Messages that cannot be settled at all (unparsable, unknown coupon) are redelivered a bounded number of
// times with backoff and then recorded as anomalies, so they never block the stream.
import type { Consumer, ConsumerMessages } from 'nats';
import type { Coupon } from '../../domain/ports.js';
import { shardRef } from '../../domain/routing.js';
import type { Logger } from '../../util/logger.js';
import { Stoppable } from '../stoppable.js';
import { decodeEvent, eventId, type SettlementEvent } from '../event.js';
import { CouponLanes } from './coupon-lanes.js';
import { Holds } from './holds.js';
import { ACK_WAIT_MS } from '../jetstream.js';
import type { FastSettle } from './fast-settle.js';
import { ANOMALY, type LedgerStore } from './ledger-store.js';
import type { RefusalStore } from './refusal-store.js';
import type { Planned } from './settle-plan.js';
import type { SettleStats } from '../stats.js';

export interface SettlerOptions {
  /** Most messages one coupon transaction applies. */
  batch: number;
  /** Deliveries of a poison message before it becomes an anomaly. */
  maxDeliver: number;
  /** Lifetime of one pull request (the server's minimum is 1000 ms). Only an empty stream waits it out: a
   * message is handed over as soon as it is there. Default 5000 ms. */
  fetchExpiresMs?: number;
  /** Transactions running at once, over all coupons. Default 4. */
  concurrency?: number;
  /** Transactions of one coupon running at once (they queue only for its row lock). Default 2. */
  perCoupon?: number;
  /** Messages the consumer keeps on their way from the server. Default 2 × batch. */
  window?: number;
}

export interface SettlerDeps {
  consumer: () => Promise<Consumer>;
  ledger: LedgerStore;
  /** The fast path for batches settled whole (fast-settle.ts); without it every batch takes the careful path. */
  fast?: FastSettle | undefined;
  refusals: RefusalStore;
  /** Asks for the coupon to be brought back within its bound (runs later, once per burst of refusals). */
  repair?: ((couponId: string, why: string) => void) | undefined;
  /** Compensations of the coupon still on their way, by event id, or null when too much is in flight to tell. */
  compensationsInFlight(coupon: Coupon): Promise<Map<string, SettlementEvent> | null>;
  stats: SettleStats;
  log?: Logger | undefined;
}

/** What the settler needs of a delivered message: a JetStream `JsMsg`, or a stand-in for an orphan read
 * straight from the stream (orphan-repair.ts). */
export interface SettleMsg {
  readonly data: Uint8Array;
  readonly seq: number;
  readonly subject: string;
  readonly headers?: { get(key: string): string } | undefined;
  readonly info: { deliveryCount: number };
  ack(): void;
  ackAck(opts?: { timeout?: number }): Promise<boolean>;
  nak(millis?: number): void;
  working(): void;
}

type Item = Planned<SettleMsg>;

/** The handle of a compensation taken from the outbox or JetStream listing to settle beside its deduction:
 * nothing to acknowledge here (its own message is acknowledged when it comes, as a duplicate). */
const SETTLED_ELSEWHERE: SettleMsg = {
  data: new Uint8Array(),
  seq: 0,
  subject: '',
  info: { deliveryCount: 1 },
  ack: () => {},
  ackAck: async () => true,
  nak: () => {},
  working: () => {},
};

/** The longest a deduction MySQL cannot cover is held while compensations of its coupon are in flight. */
const HOLD_AT_MOST_MS = 300_000;
/** Redelivery delay after n deferrals: 250 ms doubling to 4 s. */
const backoff = (n: number) => Math.min(250 * 2 ** Math.max(0, n - 1), 4000);

export class Settler {
  private readonly state = new Stoppable();
  /** Events this instance holds back (counted apart from deliveries: an outage must not use them up). */
  private readonly holds = new Holds();
  private messages: ConsumerMessages | undefined;
  /** Lane transactions failed in a row (a database outage): the intake slows down. */
  private failures = 0;

  constructor(
    private readonly d: SettlerDeps,
    private readonly options: SettlerOptions,
  ) {}

  start(): this {
    this.state.start(() => this.run());
    return this;
  }

  /** Stops pulling; what was already taken (queued in a lane or being settled) is settled and acked first. */
  stop(): Promise<void> {
    this.messages?.stop();
    return this.state.stop();
  }

  /**
   * The pipeline: a pull consumer keeps up to `window` messages on their way from the server (it asks for more
   * as they arrive, so fetching never waits for a transaction), messages go to their coupon's lane at once,
   * and each lane settles what it has queued in one transaction while the next batch builds up behind it.
   * The only wait is a pull request's expiry, and only when the stream has nothing to deliver.
   */
  private async run(): Promise<void> {
    const lanes = new CouponLanes<Item>((couponId, items) => this.settleLane(couponId, items), {
      batch: this.options.batch,
      concurrency: this.options.concurrency ?? 4,
      perCoupon: this.options.perCoupon ?? 2,
      maxBuffered: this.options.batch * ((this.options.concurrency ?? 4) + 1),
    });
    // A slow database must not let the ack wait run out under a live settler (a no-op once acked or nak'ed).
    const keepalive = setInterval(() => {
      for (const i of lanes.items()) i.ref.working();
    }, ACK_WAIT_MS / 3);
    let consumer: Consumer | undefined;
    try {
      while (this.state.running) {
        try {
          consumer ??= await this.d.consumer();
          const messages = await consumer.consume({
            max_messages: this.options.window ?? this.options.batch * 2,
            expires: this.options.fetchExpiresMs ?? 5000,
          });
          this.messages = messages;
          if (!this.state.running) messages.stop();
          for await (const m of messages) {
            if (!this.state.running) {
              // Taken from the server but not started: straight back, for any settler to take now.
              m.nak();
              continue;
            }
            const event = decodeEvent(m.data);
            if (!event) {
              await this.poison(m, ANOMALY.unparsable, null).catch((err) => this.nakAfterError([m], err));
              continue;
            }
            lanes.push(event.couponId, { event, ref: m });
            // Back-pressure: while the lanes are full this loop stops asking the iterator, and the consumer
            // stops pulling (its next pull request is issued from the iterator).
            if (!lanes.hasSpace()) await lanes.space();
            if (this.failures > 0) await this.state.pause(Math.min(5000, 250 * 2 ** this.failures));
          }
          // The iterator ended: stopped, or the consumer went away (deleted, connection closed).
          if (this.state.running) {
            consumer = undefined;
            await this.state.pause(1000);
          }
        } catch (err) {
          consumer = undefined;
          this.failures++;
          this.d.log?.warn({ err: (err as Error)?.message }, 'settler: fetch failed');
          await this.state.pause(Math.min(5000, 250 * 2 ** this.failures));
        }
      }
    } finally {
      await lanes.idle();
      clearInterval(keepalive);
      this.messages = undefined;
    }
  }

  /** One lane transaction of the pipeline: a failure naks its messages and slows the intake down. */
  private async settleLane(couponId: string, items: Item[]): Promise<void> {
    this.d.stats.batches++;
    try {
      await this.settleCoupon(couponId, items);
      this.failures = 0;
    } catch (err) {
      this.failures++;
      this.d.stats.failedBatches++;
      this.nakAfterError(
        items.map((i) => i.ref),
        err,
      );
    }
  }

  /** Settles a given set of messages (orphan repair, tests): grouped per coupon, the coupons `concurrency`
   * at a time; returns how many coupon groups failed (their messages were nak'ed). */
  async handle(msgs: SettleMsg[]): Promise<number> {
    this.d.stats.batches++;
    const keepalive = setInterval(() => {
      for (const m of msgs) m.working();
    }, ACK_WAIT_MS / 3);
    try {
      return await this.settleAll(msgs);
    } finally {
      clearInterval(keepalive);
    }
  }

  private async settleAll(msgs: SettleMsg[]): Promise<number> {
    const groups = new Map<string, Item[]>();
    for (const m of msgs) {
      const event = decodeEvent(m.data);
      if (!event) {
        await this.poison(m, ANOMALY.unparsable, null).catch((err) => this.nakAfterError([m], err));
        continue;
      }
      let g = groups.get(event.couponId);
      if (!g) {
        g = [];
        groups.set(event.couponId, g);
      }
      g.push({ event, ref: m });
    }
    const queue = [...groups.entries()];
    let failed = 0;
    const worker = async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        try {
          await this.settleCoupon(next[0], next[1]);
        } catch (err) {
          failed++;
          this.nakAfterError(
            next[1].map((i) => i.ref),
            err,
          );
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(queue.length, this.options.concurrency ?? 4) }, worker));
    if (failed > 0) this.d.stats.failedBatches++;
    return failed;
  }

  private nakAfterError(msgs: SettleMsg[], err: unknown): void {
    this.d.log?.warn(
      { err: (err as Error)?.message, messages: msgs.length },
      'settler: could not settle; messages will be delivered again',
    );
    for (const m of msgs) m.nak(1000);
  }

  private async settleCoupon(couponId: string, items: Item[]): Promise<void> {
    if (this.d.fast) {
      const outcome = await this.d.fast.apply(couponId, items);
      if (outcome === 'settled') {
        this.d.stats.fastBatches++;
        await this.ack(items, false);
        this.account(items, 0, 0);
        return;
      }
      if (outcome === 'unknown') {
        // The COMMIT got no answer: the batch may be in or not. The careful path reads the ledger first, so
        // settling it again counts nothing twice; if its own transaction fails too, the messages are nak'ed
        // (settleLane, settleAll) and delivered again.
        this.d.stats.unknownOutcomes++;
        this.d.log?.warn({ couponId, messages: items.length }, 'settler: fast commit unanswered; settling the batch again carefully');
      }
    }
    const r = await this.d.ledger.applyBatch(couponId, items);
    this.d.stats.optimisticRetries += r.retries;
    if (!r.coupon) {
      for (const i of items) await this.poison(i.ref, ANOMALY.unknownCoupon, i.event);
      return;
    }
    const coupon = r.coupon;
    const { plan } = r;
    const held = plan.held;
    const done = [...plan.apply, ...plan.duplicates, ...plan.ofRefused];
    // When deductions are held, the acks must have reached the server before counting what is in flight.
    await this.ack(done, held.length > 0);
    this.account(plan.apply, plan.duplicates.length, plan.ofRefused.length);
    this.repairAfterCompensatedRefusals(coupon, plan.ofRefused);
    for (const i of r.refused) await this.refuseOrRetry(coupon, i, true);
    for (const i of r.refusedAgain) await this.refuseOrRetry(coupon, i, false);

    for (const i of plan.waiting) this.defer(i);
    if (held.length === 0) return;
    // Only a compensation can make room (a restock reaches MySQL before Redis hands its units out), so a held
    // deduction is refused once no compensation of its coupon is on its way, apart from those in this batch
    // waiting for their own deduction (settled together with it, they leave the remaining where it is). After
    // HOLD_AT_MOST_MS it is refused regardless: a coupon under steady traffic always has some compensation in
    // flight, and the relay lag is seconds, not minutes.
    const tooLong = held.some((i) => this.holds.exhausted(i.event, this.options.maxDeliver, HOLD_AT_MOST_MS));
    const waiting = new Set(plan.waiting.map((i) => eventId(i.event)));
    // The coupon's version before the look for compensations: a settlement elsewhere between that look and
    // the refusal below (a deduction taking the room, a compensation's deduction settling so that it makes
    // room) leaves the look stale, and the refusal is then not made (the deductions wait and are decided
    // again). Checked under the row lock the refusal takes.
    const before = tooLong ? undefined : await this.d.ledger.version(couponId);
    const coming = tooLong ? new Map<string, SettlementEvent>() : await this.d.compensationsInFlight(coupon);
    if (coming === null) {
      for (const i of held) this.defer(i);
      return;
    }
    // A held deduction's own compensation on its way is settled with it now, after it (the pair leaves the
    // remaining where it is), and acknowledged as a duplicate when its own message comes. And only a
    // compensation whose deduction MySQL has settled makes room for others: one whose deduction is still on its
    // way settles with it and leaves the remaining where it was. Waiting for either, each deduction of a coupon
    // whose compensated sales were all in flight waited for the others' compensations, and they for their
    // deductions, until HOLD_AT_MOST_MS refused them as oversold although their units were back.
    const heldRequests = new Set(held.map((i) => i.event.requestId));
    const own: Item[] = [];
    for (const [id, e] of coming) if (!waiting.has(id) && heldRequests.has(e.requestId)) own.push({ event: e, ref: SETTLED_ELSEWHERE });
    const ownIds = new Set(own.map((i) => eventId(i.event)));
    const others = [...coming].filter(([id]) => !waiting.has(id) && !ownIds.has(id));
    if (others.length > 0) {
      const view = await this.d.ledger.reconcileView(
        couponId,
        others.map(([, e]) => e),
        false,
      );
      const roomComing = view === null || others.some(([id, e]) => !view.settled.has(id) && view.settled.has(eventId({ ...e, kind: 'D' })));
      if (roomComing) {
        for (const i of held) this.defer(i);
        return;
      }
    }
    const again = await this.d.ledger.applyBatch(couponId, [...held, ...own], true, before ?? undefined);
    this.d.stats.optimisticRetries += again.retries;
    await this.ack([...again.plan.apply, ...again.plan.duplicates, ...again.plan.ofRefused], false);
    for (const i of again.plan.held) this.defer(i);
    this.account(again.plan.apply, again.plan.duplicates.length, again.plan.ofRefused.length);
    this.repairAfterCompensatedRefusals(again.coupon ?? coupon, again.plan.ofRefused);
    for (const i of again.refused) await this.refuseOrRetry(again.coupon ?? coupon, i, true);
    for (const i of again.refusedAgain) await this.refuseOrRetry(again.coupon ?? coupon, i, false);
  }

  /**
   * A Compensate of a refused deduction gives nothing back when it finds the refusal mark, and puts the units
   * back on sale when it does not: the mark was late (refuse-mark-3.lua then answers given_back), or it found no
   * record because the shard was being rebuilt and the recovery restored the record from a snapshot read before
   * the refusal. Only a repair tells which, by the bound: it lowers what the Compensate gave back and changes
   * nothing otherwise. Such compensations follow an oversell anomaly, so they are rare.
   */
  private repairAfterCompensatedRefusals(coupon: Coupon, items: Item[]): void {
    if (items.length === 0) return;
    this.d.repair?.(
      coupon.id,
      `compensation of refused deduction ${items[0]!.event.requestId}${items.length > 1 ? ` and ${items.length - 1} more` : ''}`,
    );
  }

  private account(applied: Item[], duplicates: number, ofRefused: number): void {
    const s = this.d.stats;
    s.applied += applied.length;
    s.duplicates += duplicates;
    s.anomalies += ofRefused;
    let newest = 0;
    for (const i of applied) newest = Math.max(newest, i.event.occurredAt);
    if (newest > 0) s.lagMs = Math.max(0, Date.now() - newest);
  }

  private async ack(items: Item[], confirm: boolean): Promise<void> {
    for (const i of items) this.holds.release(i.event);
    if (!confirm) {
      for (const i of items) i.ref.ack();
      return;
    }
    await Promise.all(items.map((i) => i.ref.ackAck({ timeout: 5000 }).catch(() => false)));
  }

  private defer(i: Item): void {
    const id = eventId(i.event);
    const n = this.holds.hold(i.event);
    this.d.stats.deferred++;
    if (i.event.kind === 'C' && n % 20 === 0) {
      this.d.log?.warn({ eventId: id, holds: n }, 'settler: a compensation is still waiting for its deduction to settle');
    }
    i.ref.nak(backoff(n));
  }

  private async refuseOrRetry(coupon: Coupon, i: Item, first: boolean): Promise<void> {
    try {
      await this.refuse(coupon, i, first);
    } catch (err) {
      // The anomaly row is committed; the next delivery finds it and finishes marking the refusal.
      this.d.log?.warn(
        { err: (err as Error)?.message, eventId: eventId(i.event) },
        'settler: refusal not marked in Redis; retried on redelivery',
      );
      i.ref.nak(1000);
    }
  }

  /** A refused deduction stays sold; Redis learns it was refused so a Compensate does not put it on sale.
   * first: refused by this delivery (its anomaly row was just written), so counted and its coupon's repair asked
   * for, before the mark: a mark that fails is finished by a later delivery, which must not count it again (a
   * refusal delivered four times counted 8 oversold units for 2 and asked for the repair each time). */
  private async refuse(coupon: Coupon, i: Item, first: boolean): Promise<void> {
    const e = i.event;
    const id = eventId(e);
    if (first) {
      this.d.stats.refused++;
      this.d.stats.anomalies++;
      this.d.stats.oversoldUnits += e.quantity;
      this.d.log?.warn(
        { couponId: coupon.id, eventId: id, quantity: e.quantity },
        'settlement refused a deduction: oversold unit recorded as an anomaly; coupon repair requested',
      );
      this.d.repair?.(coupon.id, `settlement refused ${id}`);
    }
    const marked = e.shard < coupon.shardCount ? await this.d.refusals.markRefused(shardRef(coupon, e.shard), e.requestId) : 'gone';
    // Compensated before the mark (a mark that failed and waited for this redelivery leaves time for it): that
    // Compensate put the units back on sale, and the repair asked for above may have run before it. Another one
    // takes them away (the bound leaves a refused deduction and its compensation out), or the unit sells again.
    if (marked === 'given_back') this.d.repair?.(coupon.id, `settlement refused ${id}, compensated before the refusal mark`);
    this.holds.release(e);
    i.ref.ack();
  }

  private async poison(m: SettleMsg, reason: string, event: SettlementEvent | null): Promise<void> {
    const deliveries = m.info.deliveryCount;
    if (deliveries < this.options.maxDeliver) {
      m.nak(backoff(deliveries));
      return;
    }
    const id = event ? eventId(event) : m.headers?.get('Nats-Msg-Id') || `seq:${m.seq}`;
    const detail = `${reason} after ${deliveries} deliveries; subject ${m.subject}; payload ${new TextDecoder().decode(m.data).slice(0, 2000)}`;
    await this.d.ledger.recordPoison(id, reason, detail, event);
    this.d.stats.poison++;
    this.d.stats.anomalies++;
    this.d.log?.warn({ eventId: id, reason, deliveries }, 'settler: poison message recorded as an anomaly');
    m.ack();
  }
}
