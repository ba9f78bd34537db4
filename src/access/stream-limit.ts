// Long-lived streams (WatchStock, health Watch, reflection) held at once: at most `max` per instance and
// `perCaller` per caller, so one caller cannot take every stream, and streams cannot hold memory, timers
// and NATS subscriptions without bound. The per-caller table holds only callers with a stream open.
export class StreamLimit {
  private total = 0;
  private readonly byCaller = new Map<string, number>();

  constructor(
    readonly max: number,
    readonly perCaller: number,
  ) {}

  /** A release function, or which bound refused the stream. */
  tryOpen(caller: string): (() => void) | 'total' | 'caller' {
    if (this.total >= this.max) return 'total';
    const mine = this.byCaller.get(caller) ?? 0;
    if (mine >= this.perCaller) return 'caller';
    this.total++;
    this.byCaller.set(caller, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.byCaller.get(caller) ?? 1) - 1;
      if (left > 0) this.byCaller.set(caller, left);
      else this.byCaller.delete(caller);
    };
  }

  get open(): number {
    return this.total;
  }

  get callers(): number {
    return this.byCaller.size;
  }
}
