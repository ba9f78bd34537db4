// A worker loop's running flag and its pauses, so stop() does not wait out a backoff.
export class Stoppable {
  running = false;
  private wake: (() => void) | undefined;

  /** Resolves after ms, or as soon as stop() is called. */
  pause(ms: number): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  stop(): void {
    this.running = false;
    this.wake?.();
  }
}
