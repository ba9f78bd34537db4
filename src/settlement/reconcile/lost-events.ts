// Deductions and compensations Redis recorded whose events never reached MySQL and are no longer on their way:
// JetStream lost them after the relay had removed them from the outbox (NATS back on an empty store, the
// stream deleted or purged). The request records in the shards (idempotency window) still say what each
// request did, so a repair sends those events again.
//
// Sending one again is always safe: its id is the ledger's unique key, so an event that was in fact settled or
// still on its way settles once; a deduction that was refused meanwhile is recognised as a repeat of the
// refusal. Read order as InFlight's: the records (Redis) first, then the outboxes and JetStream, then the
// ledger, so an event moving along the pipeline meanwhile is found somewhere and not taken for lost.
import type { Coupon } from '../../domain/ports.js';
import { allShards } from '../../domain/routing.js';
import type { RedisRecoveryStore } from '../../redis/recovery-store.js';
import type { Logger } from '../../util/logger.js';
import { encodeEvent, eventId, type SettlementEvent } from '../event.js';
import type { EventPublisher } from '../relay/relay.js';
import type { LedgerStore } from '../settle/ledger-store.js';
import { InFlight } from './in-flight.js';

/** The reason a compensation sent again carries (its original reason went with the lost event). */
export const RESENT_REASON = 'resent: event lost before settlement';

export class LostEvents {
  constructor(
    private readonly records: Pick<RedisRecoveryStore, 'deductionRecords'>,
    private readonly inFlight: InFlight,
    private readonly ledger: Pick<LedgerStore, 'reconcileView'>,
    private readonly publisher: EventPublisher,
    private readonly log?: Logger,
  ) {}

  /** The coupon's recorded events that are neither settled, refused nor in flight. */
  async find(coupon: Coupon): Promise<SettlementEvent[]> {
    const recorded: SettlementEvent[] = [];
    for (const ref of allShards(coupon)) {
      for (const [requestId, r] of await this.records.deductionRecords(ref)) {
        // A refused deduction (and its compensation) is MySQL's anomaly already, never a sale.
        if (r.refused) continue;
        const base = { couponId: coupon.id, requestId, userId: r.userId, quantity: r.quantity, shard: ref.index };
        const occurredAt = r.deductedAt ?? Date.now();
        recorded.push({ ...base, kind: 'D', occurredAt, reason: '' });
        if (r.compensated) recorded.push({ ...base, kind: 'C', occurredAt, reason: RESENT_REASON });
      }
    }
    if (recorded.length === 0) return [];
    const snap = await this.inFlight.snapshot(coupon);
    const moving = new Set(InFlight.candidates(snap).map(eventId));
    const view = await this.ledger.reconcileView(coupon.id, recorded, false);
    if (!view) return [];
    return recorded.filter((e) => {
      const id = eventId(e);
      return !moving.has(id) && !view.settled.has(id) && !view.refused.has(id);
    });
  }

  /** Sends the lost events to JetStream again (each once stored there); returns them. */
  async resend(coupon: Coupon): Promise<SettlementEvent[]> {
    const lost = await this.find(coupon);
    if (lost.length === 0) return lost;
    this.log?.error(
      { couponId: coupon.id, events: lost.length, units: lost.reduce((n, e) => n + (e.kind === 'D' ? e.quantity : -e.quantity), 0) },
      'reconcile repair: events Redis recorded never reached MySQL and are not in flight; sending them again',
    );
    await Promise.all(lost.map((e) => this.publisher.publish(e.couponId, eventId(e), encodeEvent(e))));
    return lost;
  }
}
