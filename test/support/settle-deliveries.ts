// Settlement events and their deliveries as a settler is handed them (Settler.handle), for suites that play
// JetStream themselves: each delivery records what the settler did with it.
import { encodeEvent, type SettlementEvent } from '../../src/settlement/event.js';
import type { SettleMsg } from '../../src/settlement/settle/settler.js';

/** A delivered message as the settler sees it, recording what the settler did with it. */
export interface Delivery extends SettleMsg {
  outcome: 'acked' | 'nakked' | undefined;
}

let seq = 0;
export function delivery(e: SettlementEvent): Delivery {
  const d: Delivery = {
    data: encodeEvent(e),
    seq: ++seq,
    subject: `test.${e.couponId}`,
    info: { deliveryCount: 1 },
    outcome: undefined,
    ack: () => {
      d.outcome = 'acked';
    },
    ackAck: async () => {
      d.outcome = 'acked';
      return true;
    },
    nak: () => {
      d.outcome = 'nakked';
    },
    working: () => {},
  };
  return d;
}

/** A deduction on shard 0 by user `u-<requestId>`. */
export const deductEvent = (couponId: string, requestId: string, quantity: number): SettlementEvent => ({
  kind: 'D',
  couponId,
  requestId,
  userId: `u-${requestId}`,
  quantity,
  shard: 0,
  occurredAt: Date.now(),
  reason: '',
});

/** The compensation of deduction `d`. */
export const compensationOf = (d: SettlementEvent): SettlementEvent => ({ ...d, kind: 'C', reason: 'cancelled' });
