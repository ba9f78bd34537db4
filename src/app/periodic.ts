// A background job that runs every `intervalMs`, never overlapping itself, and stops cleanly.
export class Periodic {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly job: () => Promise<void>,
    private readonly onError: (name: string, err: unknown) => void,
  ) {}

  start(): this {
    this.schedule(0);
    return this;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.job()
        .catch((err) => this.onError(this.name, err))
        .finally(() => {
          this.running = undefined;
          this.schedule(this.intervalMs);
        });
    }, ms);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
