// StockSignals over NATS core: one subject per coupon under <ns>.signals.returned.<coupon>. Loss of a
// message is harmless: an instance's sold-out flag also expires on its own.
import { StringCodec, type NatsConnection, type Subscription } from 'nats';
import type { StockSignals } from '../domain/ports.js';
import { natsSubjects } from './subjects.js';

const sc = StringCodec();

export class NatsStockSignals implements StockSignals {
  private readonly listeners = new Set<(couponId: string) => void>();
  private readonly sub: Subscription;
  private readonly subjects;

  constructor(
    private readonly nc: NatsConnection,
    namespace: string,
  ) {
    this.subjects = natsSubjects(namespace);
    this.sub = nc.subscribe(this.subjects.stockReturnedAll, {
      callback: (err, msg) => {
        if (err) return;
        const couponId = sc.decode(msg.data);
        for (const l of this.listeners) l(couponId);
      },
    });
  }

  stockReturned(couponId: string): void {
    try {
      // The payload carries the id: the subject holds it escaped (nats/subjects.ts).
      this.nc.publish(this.subjects.stockReturned(couponId), sc.encode(couponId));
    } catch {
      // Connection closed or draining: other instances fall back to their flag's TTL.
    }
  }

  onStockReturned(listener: (couponId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
