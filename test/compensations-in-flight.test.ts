// The settler refuses a deduction MySQL cannot cover only when no compensation of its coupon is on its way
// (src/settlement/settle/settler.ts): compensationsInFlight must see every compensation Redis has applied and
// MySQL has not, also one the relay moves from its outbox to JetStream while it is being looked for. Missed,
// the deduction whose units that compensation gave back is recorded as oversold and its coupon repaired,
// on a sale that never sold a unit it did not have (found under CPU load by test/settlement.test.ts's race of
// two instances).
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompensateOutcome, DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { allShards } from '../src/domain/routing.js';
import { eventId } from '../src/settlement/event.js';
import { ensureSettlementStream, settlementNames } from '../src/settlement/jetstream.js';
import { InFlight } from '../src/settlement/reconcile/in-flight.js';
import type { OutboxStreams } from '../src/settlement/relay/outbox.js';
import { JetStreamPublisher } from '../src/settlement/relay/publisher.js';
import type { SettlementStreamReader } from '../src/settlement/jetstream.js';
import { encodeEvent } from '../src/settlement/event.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let t: TestApp;
let nc: NatsConnection;
beforeAll(async () => {
  // No relay and no settler: the test moves the events itself, at the moment it chooses.
  t = await startTestApp({ SHARDSTOCK_WORKERS: 'none' });
  nc = await connect({ servers: 'nats://127.0.0.1:4222' });
  await ensureSettlementStream(nc, settlementNames(t.namespace), { maxAckPending: 1000 });
});
afterAll(async () => {
  if (nc) {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(settlementNames(t.namespace).stream).catch(() => {});
    await nc.close();
  }
  await t?.close();
});

describe('compensations on their way to MySQL', () => {
  it('when the relay moves a compensation from its outbox to JetStream while they are read, then it is still found', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const d = await t.client.deduct({ couponId: id, requestId: 'r-1', quantity: 2n });
    expect(d.outcome).toBe(DeductOutcome.DEDUCTED);
    const c = await t.client.compensate({ couponId: id, requestId: 'r-1', reason: 'cancelled' });
    expect(c.outcome).toBe(CompensateOutcome.COMPENSATED);

    const coupon = (await t.app.settlement.ledger.find(id))!;
    const real = t.app.settlement.outbox;
    const stream = t.app.settlement.stream;
    const publisher = new JetStreamPublisher(nc, settlementNames(t.namespace));
    const home = allShards(coupon).find((ref) => ref.index === d.shard)!;

    // JetStream's count is taken before the relay publishes; the outbox's length after it deleted the entry.
    // Read side by side (as before the fix), the compensation is in neither; read in order (outboxes, then
    // JetStream), the JetStream read comes after the move and finds it. The wait for the JetStream read is
    // bounded, so the order the code chooses decides, not this test.
    let jetstreamRead: () => void = () => {};
    const jetstreamReadDone = new Promise<void>((resolve) => (jetstreamRead = resolve));
    const racedStream: SettlementStreamReader = Object.assign(Object.create(stream) as SettlementStreamReader, {
      pending: async (couponId: string) => {
        const n = await stream.pending(couponId);
        jetstreamRead();
        return n;
      },
    });
    let moved = 0;
    const racedOutbox: OutboxStreams = Object.assign(Object.create(real) as OutboxStreams, {
      backlog: async (ref: typeof home) => {
        if (ref.index === home.index) {
          await Promise.race([jetstreamReadDone, new Promise((r) => setTimeout(r, 300))]);
          // What the relay does: publish every event of the entries, then acknowledge and delete them.
          const entries = await real.read(ref, 100);
          for (const e of entries)
            for (const o of e.events) if (o.event) await publisher.publish(id, eventId(o.event), encodeEvent(o.event));
          await real.remove(
            ref,
            entries.map((e) => e.streamId),
          );
          moved += entries.length;
        }
        return real.backlog(ref);
      },
    });

    try {
      const found = await new InFlight(t.app.settlement.ledger, racedOutbox, racedStream).compensationsInFlight(coupon);
      expect(moved).toBeGreaterThan(0);
      expect(await stream.pending(id)).toBe(2);
      expect([...(found?.keys() ?? [])]).toEqual([eventId({ kind: 'C', couponId: id, requestId: 'r-1' })]);
    } finally {
      publisher.close();
    }
  });
});
