// What Redis has applied and MySQL has not settled yet, for one coupon: the events in its shards' outboxes
// plus its unsettled JetStream messages, each counted once by event id (an event is in both between its
// publish and its XDEL), minus those already in the ledger (settled, not acked yet) and refused deductions
// with their compensations (MySQL never applies them).
//
// Read order matters for a live coupon: Redis first, then JetStream, then MySQL's ledger, so an event moving
// along the pipeline while it is counted is seen at least once and never counted as both settled and in
// flight (Reconcile also reads MySQL's coupon row before all of these: reconciler.ts says why).
import { moveCreditId } from '../../domain/ids.js';
import type { Coupon, InFlightCounter, PendingMove, ShardLevel, ShardRef } from '../../domain/ports.js';
import { allShards } from '../../domain/routing.js';
import { eventId, signedQuantity, type SettlementEvent } from '../event.js';
import type { SettlementStreamReader } from '../jetstream.js';
import type { LedgerStore, ReconcileView } from '../settle/ledger-store.js';
import type { OutboxSnapshot, OutboxStreams } from '../relay/outbox.js';

export interface InFlightSnapshot {
  levels: ShardLevel[];
  outbox: Map<string, SettlementEvent>;
  jetstream: Map<string, SettlementEvent>;
}

export interface InFlightFigures {
  net: number;
  outboxEvents: number;
  jetstreamPending: number;
}

export class InFlight implements InFlightCounter {
  constructor(
    private readonly ledger: LedgerStore,
    private readonly outbox: OutboxStreams,
    private readonly stream: SettlementStreamReader,
  ) {}

  /** Shard levels and outbox events (Redis), then unsettled JetStream messages. A level's `inTransit` leaves out
   * moves already credited at their target (landedMovesLeftOut). `retries`: reads of the shards again when a
   * move started during one (shardsWithoutMoveStarted). */
  async snapshot(coupon: Pick<Coupon, 'id' | 'shardTags'>, retries = 4): Promise<InFlightSnapshot> {
    const refs = allShards(coupon);
    for (let i = 0; ; i++) {
      const shards = await this.shardsWithoutMoveStarted(refs);
      // Still racing after every retry (a coupon whose shards move units all the time): the last read, which may
      // count one move twice; the periodic reconciler only reports drift that persists over runs.
      if (shards.settled || i === retries) return this.finish(coupon, shards.read);
    }
  }

  /**
   * The shards are read side by side, not at one instant. A move that starts after its source was read and lands
   * before its target is read has its units in both reads, and Reconcile showed Redis above its bound where
   * nothing was wrong. Each source counts the moves started out of it (lua/move-out-2.lua): read again after
   * every level and every landing, an unchanged count says no move began during the read, so each unit was
   * seen at most once (moves that began before are left out of transit by landedMovesLeftOut once landed).
   */
  private async shardsWithoutMoveStarted(refs: ShardRef[]): Promise<{ read: OutboxSnapshot[]; settled: boolean }> {
    const read = await Promise.all(refs.map((ref) => this.outbox.snapshot(ref)));
    await this.landedMovesLeftOut(refs, read);
    const after = await Promise.all(refs.map((ref) => this.outbox.movesStarted(ref)));
    return { read, settled: after.every((n, i) => n === read[i]!.movesStarted) };
  }

  private async finish(coupon: Pick<Coupon, 'id'>, shards: OutboxSnapshot[]): Promise<InFlightSnapshot> {
    const outbox = new Map<string, SettlementEvent>();
    for (const s of shards) for (const e of s.events) outbox.set(eventId(e), e);
    const jetstream = await this.stream.events(coupon.id);
    return { levels: shards.map((s) => s.level), outbox, jetstream };
  }

  /**
   * A move's units are in its target's `avail` from its credit on, and still in its source's `transit` until its
   * acknowledgement: a read of both shards in between counted them twice, and Reconcile showed Redis above its
   * bound (a positive redisDrift) where nothing was wrong. Whether each move the sources listed was credited is
   * read here, after every level: one credited by then was counted at its target if it landed before the
   * target's level was read, and nowhere if after — never twice, so its transit is left out.
   */
  private async landedMovesLeftOut(refs: ShardRef[], shards: Pick<OutboxSnapshot, 'level' | 'moves'>[]): Promise<void> {
    const byTarget = new Map<number, { source: ShardLevel; move: PendingMove }[]>();
    for (const s of shards) {
      for (const move of s.moves) {
        if (!refs[move.target]) continue;
        const list = byTarget.get(move.target) ?? [];
        list.push({ source: s.level, move });
        byTarget.set(move.target, list);
      }
    }
    await Promise.all(
      [...byTarget].map(async ([target, list]) => {
        const landed = await this.outbox.credited(
          refs[target]!,
          list.map((m) => moveCreditId(m.move.moveId)),
        );
        list.forEach((m, i) => {
          if (landed[i]) m.source.inTransit = Math.max(0, m.source.inTransit - m.move.quantity);
        });
      }),
    );
  }

  static candidates(s: InFlightSnapshot): SettlementEvent[] {
    const all = new Map(s.outbox);
    for (const [id, e] of s.jetstream) all.set(id, e);
    return [...all.values()];
  }

  static figures(s: InFlightSnapshot, view: Pick<ReconcileView, 'settled' | 'refused'>): InFlightFigures {
    let net = 0;
    for (const e of InFlight.candidates(s)) {
      const id = eventId(e);
      if (!view.settled.has(id) && !view.refused.has(id)) net += signedQuantity(e);
    }
    return { net, outboxEvents: s.outbox.size, jetstreamPending: s.jetstream.size };
  }

  async measure(couponId: string): Promise<InFlightFigures> {
    const coupon = await this.ledger.find(couponId);
    if (!coupon) return { net: 0, outboxEvents: 0, jetstreamPending: 0 };
    const snap = await this.snapshot(coupon);
    const view = await this.ledger.reconcileView(couponId, InFlight.candidates(snap), false);
    return view ? InFlight.figures(snap, view) : { net: 0, outboxEvents: 0, jetstreamPending: 0 };
  }

  async inFlightNet(couponId: string): Promise<number> {
    return (await this.measure(couponId)).net;
  }

  /** Compensations of the coupon still on their way to MySQL (outbox or JetStream), by event id: the only
   * events that can make room for a deduction MySQL cannot cover yet. null when more than `limit` events are
   * in flight (too many to look through; the caller assumes there may be some).
   * The outboxes are read before JetStream, as snapshot() does: the relay publishes an event before it deletes
   * it from its outbox, so one that moves between the two reads is seen in the second. Read side by side, a
   * compensation published and deleted between them was in neither, and the deduction it made room for was
   * refused as oversold (reproduced under CPU load with two instances racing Deducts and Compensates). */
  async compensationsInFlight(coupon: Pick<Coupon, 'id' | 'shardTags'>, limit = 5000): Promise<Map<string, SettlementEvent> | null> {
    const shards = allShards(coupon);
    const lengths = await Promise.all(shards.map((ref) => this.outbox.backlog(ref).then((b) => b.length)));
    let seen = lengths.reduce((a, b) => a + b, 0);
    if (seen > limit) return null;
    const out = new Map<string, SettlementEvent>();
    for (const s of await Promise.all(shards.filter((_, i) => lengths[i]! > 0).map((ref) => this.outbox.snapshot(ref)))) {
      for (const e of s.events) if (e.kind === 'C') out.set(eventId(e), e);
    }
    const pending = await this.stream.pending(coupon.id);
    seen += pending;
    if (seen > limit) return null;
    if (pending > 0) for (const [id, e] of await this.stream.events(coupon.id)) if (e.kind === 'C') out.set(id, e);
    return out;
  }
}
