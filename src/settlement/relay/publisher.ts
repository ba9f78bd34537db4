// EventPublisher on JetStream: a publish resolves only once the stream stored the message (or recognised its
// id as a repeat within the duplicate window).
//
// Not `js.publish()`: that is one request object per message, each building two Error objects for async stack
// traces and a cancellation error on completion, which made the relay's CPU per event the limit of the whole
// pipeline. Here every publish is a plain PUB with a reply subject under this publisher's own inbox; one
// subscription takes all PubAcks, and one timer fails the publishes whose PubAck is overdue. Same wire
// protocol as js.publish (the Nats-Msg-Id header carries the event id).
import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from 'nats';
import type { SettlementNames } from '../jetstream.js';
import type { EventPublisher } from './relay.js';

interface Waiting {
  resolve: (r: 'stored' | 'duplicate') => void;
  reject: (err: Error) => void;
  deadline: number;
}

const decoder = new TextDecoder();

export class PublishError extends Error {
  override name = 'PublishError';
}

export class JetStreamPublisher implements EventPublisher {
  private readonly inbox: string;
  private sub: Subscription | undefined;
  private readonly waiting = new Map<string, Waiting>();
  private next = 0;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: SettlementNames,
    private readonly timeoutMs = 5000,
  ) {
    this.inbox = createInbox();
  }

  publish(couponId: string, msgId: string, data: Uint8Array): Promise<'stored' | 'duplicate'> {
    if (this.nc.isClosed()) return Promise.reject(new PublishError('NATS connection closed'));
    this.listen();
    const token = (this.next++).toString(36);
    const h = headers();
    h.set('Nats-Msg-Id', msgId);
    return new Promise((resolve, reject) => {
      this.waiting.set(token, { resolve, reject, deadline: Date.now() + this.timeoutMs });
      try {
        this.nc.publish(this.names.subject(couponId), data, { headers: h, reply: `${this.inbox}.${token}` });
      } catch (err) {
        this.waiting.delete(token);
        reject(err as Error);
      }
    });
  }

  /** Fails every publish still waiting and stops listening. */
  close(): void {
    this.sub?.unsubscribe();
    this.sub = undefined;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.failAll('publisher closed');
  }

  private listen(): void {
    this.sweeper ??= setInterval(() => this.expire(), Math.min(1000, this.timeoutMs)).unref();
    if (this.sub && !this.sub.isClosed()) return;
    this.sub = this.nc.subscribe(`${this.inbox}.*`, { callback: (err, msg) => (err ? this.failAll(err.message) : this.answer(msg)) });
  }

  private answer(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length + 1);
    const w = this.waiting.get(token);
    if (!w) return;
    this.waiting.delete(token);
    // A status reply (503: no stream takes the subject) has no body.
    if (msg.headers?.hasError) {
      w.reject(new PublishError(`JetStream publish failed: ${msg.headers.code} ${msg.headers.description}`));
      return;
    }
    let ack: { stream?: string; duplicate?: boolean; error?: { description?: string; code?: number } };
    try {
      ack = JSON.parse(decoder.decode(msg.data));
    } catch {
      w.reject(new PublishError('JetStream publish: unreadable PubAck'));
      return;
    }
    if (ack.error || !ack.stream)
      w.reject(new PublishError(`JetStream publish failed: ${ack.error?.description ?? 'no stream in PubAck'}`));
    else w.resolve(ack.duplicate ? 'duplicate' : 'stored');
  }

  private expire(): void {
    if (this.waiting.size === 0) {
      // Idle: no timer left behind (listen() starts it again).
      clearInterval(this.sweeper);
      this.sweeper = undefined;
      return;
    }
    const now = Date.now();
    for (const [token, w] of this.waiting) {
      if (w.deadline > now) continue;
      this.waiting.delete(token);
      w.reject(new PublishError(`JetStream publish: no PubAck within ${this.timeoutMs} ms`));
    }
  }

  private failAll(why: string): void {
    const all = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of all) w.reject(new PublishError(`JetStream publish: ${why}`));
  }
}
