// A worker loop: its running flag, its pauses (so stop() does not wait out a backoff) and the loop itself,
// so stop() returns once the current iteration has finished.
export class Stoppable {
  running = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  start(run: () => Promise<void>): void {
    this.running = true;
    this.loop = run();
  }

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

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
  }
}
