// SaleSignals over NATS core: <ns>.signals.sale.<coupon> carries the coupon's new sale settings with their
// revision, so a receiver applies them without a MySQL read and ignores one older than what it holds. A lost
// message is healed by the coupon catalog's background re-read.
import { StringCodec, type NatsConnection, type Subscription } from 'nats';
import type { SaleSettings, SaleSignals } from '../domain/ports.js';
import { natsSubjects, type NatsSubjects } from './subjects.js';

const sc = StringCodec();

export class NatsSaleSignals implements SaleSignals {
  private readonly listeners = new Set<(couponId: string, sale: SaleSettings) => void>();
  private readonly sub: Subscription;
  private readonly subjects: NatsSubjects;

  constructor(
    private readonly nc: NatsConnection,
    namespace: string,
  ) {
    this.subjects = natsSubjects(namespace);
    this.sub = nc.subscribe(this.subjects.saleAll, {
      callback: (err, msg) => {
        if (err) return;
        let body: { couponId: string; sale: SaleSettings };
        try {
          body = JSON.parse(sc.decode(msg.data));
        } catch {
          return;
        }
        for (const l of this.listeners) l(body.couponId, body.sale);
      },
    });
  }

  saleChanged(couponId: string, sale: SaleSettings): void {
    try {
      this.nc.publish(this.subjects.sale(couponId), sc.encode(JSON.stringify({ couponId, sale })));
    } catch {
      // Connection closed or draining: other instances pick the change up on their next re-read.
    }
  }

  onSaleChanged(listener: (couponId: string, sale: SaleSettings) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
