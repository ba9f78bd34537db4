// Ends the orders their callers left unfinished (an instance died mid-order): every instance runs it, so no
// order depends on the process that started it. Racing sweepers are harmless: the decision on the order
// record is made once, and every step after it is idempotent.
import type { OrderRecords } from './ports.js';
import type { OrderService, SweepEnd } from './orders.js';

export interface OrderSweepStats {
  sweeps: number;
  /** Orders this instance's sweeper ended, by how (orders.ts SweepEnd). */
  ended: Record<SweepEnd, number>;
}

/** How many due orders one pass takes from each due-list. */
const BATCH = 50;
/** A failed order is looked at again this much later, not in a tight loop. */
const RETRY_MS = 1000;

export class OrderSweeper {
  readonly stats: OrderSweepStats = { sweeps: 0, ended: { abandoned: 0, finished: 0, expired: 0, tidied: 0, gone: 0 } };

  constructor(
    private readonly orders: Pick<OrderService, 'sweep'>,
    private readonly records: Pick<OrderRecords, 'due' | 'schedule' | 'unschedule'>,
    private readonly onError: (what: string, err: unknown) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  /** One pass; resolves to the number of orders it ended. */
  async sweep(): Promise<number> {
    this.stats.sweeps++;
    const due = await this.records.due(this.now(), BATCH);
    let ended = 0;
    await Promise.all(
      due.map(async (orderId) => {
        try {
          const r = await this.orders.sweep(orderId);
          if ('ended' in r) {
            await this.records.unschedule(orderId);
            this.stats.ended[r.ended]++;
            ended++;
          } else await this.records.schedule(orderId, r.nextAtMs);
        } catch (err) {
          this.onError('order sweep', err);
          await this.records.schedule(orderId, this.now() + RETRY_MS).catch(() => {});
        }
      }),
    );
    return ended;
  }
}
