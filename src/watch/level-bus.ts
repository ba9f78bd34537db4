// Stock-level news between instances over NATS core: "coupon X changed" pings on <ns>.levels.<coupon>,
// low-stock events on <ns>.alerts.low_stock.<coupon>, sold-out and back-in-stock events on
// <ns>.alerts.sold_out.<coupon> and <ns>.alerts.back_in_stock.<coupon> (docs/observability.md). A ping carries no level: each instance that has
// watchers reads the level itself, so levels from several publishers can never arrive out of order. It carries
// nothing at all: the subject names the coupon and receivers only need to know that it changed, and an
// instance announces each changed coupon every interval, so a body would be built, encoded and sent per coupon
// per interval for no reader.
import { StringCodec, type NatsConnection, type Subscription } from 'nats';
import { natsSubjects } from '../nats/subjects.js';

const sc = StringCodec();

export interface LowStockEvent {
  couponId: string;
  available: number;
  threshold: number;
  totalStock: number;
  at: string;
}

export class LevelBus {
  private subs = 0;
  private readonly subjects;

  constructor(
    private readonly nc: NatsConnection,
    namespace: string,
  ) {
    this.subjects = natsSubjects(namespace);
  }

  levelSubject(couponId: string): string {
    return this.subjects.level(couponId);
  }

  lowStockSubject(couponId: string): string {
    return this.subjects.lowStock(couponId);
  }

  /** Tells every instance (this one included: NATS echoes) that the coupon's level changed. */
  announce(couponId: string): void {
    try {
      this.nc.publish(this.levelSubject(couponId));
    } catch {
      // Closed or draining: watchers fall back to their periodic refresh.
    }
  }

  publishLowStock(event: LowStockEvent): void {
    this.publish(this.lowStockSubject(event.couponId), event);
  }

  stockEventSubject(kind: 'sold_out' | 'back_in_stock', couponId: string): string {
    return this.subjects.stockEvent(kind, couponId);
  }

  publishStockEvent(event: { couponId: string; kind: 'sold_out' | 'back_in_stock' }): void {
    this.publish(this.stockEventSubject(event.kind, event.couponId), event);
  }

  /** One NATS subscription; the caller keeps one per coupon and fans out locally. */
  listen(couponId: string, onChange: () => void): () => void {
    const sub: Subscription = this.nc.subscribe(this.levelSubject(couponId), {
      callback: (err) => {
        if (!err) onChange();
      },
    });
    this.subs++;
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.subs--;
      sub.unsubscribe();
    };
  }

  /** NATS subscriptions this bus holds now. */
  get subscriptions(): number {
    return this.subs;
  }

  private publish(subject: string, body: unknown): void {
    try {
      this.nc.publish(subject, sc.encode(JSON.stringify(body)));
    } catch {
      // Closed or draining: watchers fall back to their periodic refresh.
    }
  }
}
