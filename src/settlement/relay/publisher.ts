// EventPublisher on JetStream: a publish resolves only once the stream stored the message (or recognised its
// id as a repeat within the duplicate window).
import type { JetStreamClient, NatsConnection } from 'nats';
import type { SettlementNames } from '../jetstream.js';
import type { EventPublisher } from './relay.js';

export class JetStreamPublisher implements EventPublisher {
  private readonly js: JetStreamClient;

  constructor(
    nc: NatsConnection,
    private readonly names: SettlementNames,
    private readonly timeoutMs = 5000,
  ) {
    this.js = nc.jetstream();
  }

  async publish(couponId: string, msgId: string, data: Uint8Array): Promise<'stored' | 'duplicate'> {
    const ack = await this.js.publish(this.names.subject(couponId), data, { msgID: msgId, timeout: this.timeoutMs });
    return ack.duplicate ? 'duplicate' : 'stored';
  }
}
