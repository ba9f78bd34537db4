// Orphans: messages still in the WorkQueue stream although the consumer's ack floor is past them. A NATS
// server killed hard can come back with its consumer state ahead of its stream (the acks were recorded, the
// removals were not): nothing will ever deliver those messages again, and they would sit in the stream,
// counted as unsettled, for ever. This reads them straight from the stream, settles them like any delivery
// (normally the ledger already has them) and deletes them.
import type { JetStreamManager, NatsConnection } from 'nats';
import type { Logger } from '../../util/logger.js';
import type { SettlementNames } from '../jetstream.js';
import type { SettleMsg, Settler } from './settler.js';

const PARALLEL = 64;

export class OrphanRepair {
  repaired = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: SettlementNames,
    private readonly settler: Pick<Settler, 'handle'>,
    /** Poison handling treats an orphan as out of redeliveries. */
    private readonly maxDeliver: number,
    private readonly log?: Logger,
    private readonly limit = 5000,
  ) {}

  async runOnce(): Promise<number> {
    const jsm = await this.nc.jetstreamManager();
    const consumer = await jsm.consumers.info(this.names.stream, this.names.durable);
    const floor = consumer.ack_floor.stream_seq;
    const { state } = await jsm.streams.info(this.names.stream);
    if (state.messages === 0 || state.first_seq > floor) return 0;
    const last = Math.min(floor, state.first_seq + this.limit * 4);
    const msgs: SettleMsg[] = [];
    for (let from = state.first_seq; from <= last && msgs.length < this.limit; from += PARALLEL) {
      const seqs = Array.from({ length: Math.min(PARALLEL, last - from + 1) }, (_, i) => from + i);
      const got = await Promise.all(seqs.map((seq) => jsm.streams.getMessage(this.names.stream, { seq }).catch(() => null)));
      for (const m of got) if (m) msgs.push(this.orphan(jsm, m.seq, m.subject, m.data));
    }
    if (msgs.length === 0) return 0;
    this.log?.warn(
      { orphans: msgs.length, ackFloor: floor },
      'settlement: messages below the consumer ack floor left in the stream; settling and removing them',
    );
    await this.settler.handle(msgs);
    this.repaired += msgs.length;
    return msgs.length;
  }

  private orphan(jsm: JetStreamManager, seq: number, subject: string, data: Uint8Array): SettleMsg {
    const remove = () => jsm.streams.deleteMessage(this.names.stream, seq, false).catch(() => false);
    return {
      data,
      seq,
      subject,
      headers: undefined,
      info: { deliveryCount: this.maxDeliver },
      ack: () => void remove(),
      ackAck: () => remove(),
      // Left in place: the next run looks at it again.
      nak: () => {},
      working: () => {},
    };
  }
}
