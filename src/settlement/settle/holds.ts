// Which events this settler is holding back (nak'ed with a delay, waiting to be delivered again), how often
// and since when: kept apart from JetStream's delivery count, which an outage (every delivery failing) would
// use up without the event ever having been looked at.
import type { SettlementEvent } from '../event.js';
import { eventId } from '../event.js';

const MAX_ENTRIES = 1_000_000;
/** An entry not held again for this long belongs to an event another settler finished: dropped. */
const FORGET_MS = 10 * 60_000;

interface Hold {
  count: number;
  firstMs: number;
  lastMs: number;
}

export class Holds {
  private readonly byId = new Map<string, Hold>();
  private ops = 0;

  /** Records one more hold of the event; returns how many times it has been held. */
  hold(e: SettlementEvent, now = Date.now()): number {
    const id = eventId(e);
    const h = this.byId.get(id);
    if (h) {
      h.count++;
      h.lastMs = now;
      return h.count;
    }
    if (++this.ops % 10_000 === 0) {
      for (const [k, old] of this.byId) if (now - old.lastMs > FORGET_MS) this.byId.delete(k);
    }
    if (this.byId.size >= MAX_ENTRIES) this.byId.clear();
    this.byId.set(id, { count: 1, firstMs: now, lastMs: now });
    return 1;
  }

  release(e: SettlementEvent): void {
    this.byId.delete(eventId(e));
  }

  /** Held at least `times` times over at least `forMs`. */
  exhausted(e: SettlementEvent, times: number, forMs: number, now = Date.now()): boolean {
    const h = this.byId.get(eventId(e));
    return !!h && h.count >= times && now - h.firstMs >= forMs;
  }
}
