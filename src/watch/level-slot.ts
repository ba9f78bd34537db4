// What one WatchStock stream has not sent yet: the latest level only, so a slow reader costs one level of
// memory, not a queue. A final level (sold out) is the exception: it is kept until sent, and a newer level
// waits behind it, so coalescing never swallows the moment a sale ran out (at most two levels held).
import type { StockLevel } from '../domain/model.js';

export function isFinal(level: StockLevel): boolean {
  return level.soldOut || level.available <= 0;
}

export class LevelSlot {
  private pending: StockLevel[] = [];
  private waiter: ((ok: boolean) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  offer(level: StockLevel): void {
    if (this.closed) return;
    const head = this.pending[0];
    if (isFinal(level) || head === undefined || !isFinal(head)) this.pending = [level];
    else this.pending = [head, level];
    this.wake(true);
  }

  /** Resolves true when a level is pending, false once closed. */
  ready(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.pending.length > 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      this.waiter = resolve;
    });
  }

  /** Waits `ms` (levels keep arriving meanwhile); false if closed first. */
  sleep(ms: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      this.waiter = resolve;
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.wake(true);
      }, ms);
    });
  }

  shift(): StockLevel | undefined {
    return this.pending.shift();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pending = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.wake(false);
  }

  get hasTimer(): boolean {
    return this.timer !== undefined;
  }

  get size(): number {
    return this.pending.length;
  }

  private wake(ok: boolean): void {
    // While sleeping, only the timer (or close) ends the wait: a new level must not cut the interval short.
    if (this.timer && ok) return;
    const w = this.waiter;
    this.waiter = undefined;
    w?.(ok);
  }
}
