// Bounded in-flight work: at most `max` calls run at once; one more is refused at the door instead of
// queueing behind the others (a queue only turns overload into timeouts for everyone).
export class InFlightLimit {
  private running = 0;
  /** Calls refused since start. */
  shed = 0;

  constructor(readonly max: number) {}

  /** A release function, or undefined when the limit is reached. */
  tryEnter(): (() => void) | undefined {
    if (this.running >= this.max) {
      this.shed++;
      return undefined;
    }
    this.running++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
    };
  }

  get inFlight(): number {
    return this.running;
  }
}
