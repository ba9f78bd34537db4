// One progress line on stderr while a run goes, redrawn at most ~5 times a second; only on a terminal.

export class Progress {
  private last = 0;
  private drawn = false;

  constructor(private readonly enabled: boolean = process.stderr.isTTY === true) {}

  /** `done`/`total` in units of the run (requests, units sold or seconds). */
  draw(label: string, done: number, total: number, extra: string): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (now - this.last < 200) return;
    this.last = now;
    const width = 28;
    const frac = total > 0 ? Math.min(1, done / total) : 0;
    const full = Math.round(frac * width);
    const bar = '█'.repeat(full) + '░'.repeat(width - full);
    process.stderr.write(`\r\x1b[2K${label} ${bar} ${Math.floor(frac * 100)}% ${extra}`);
    this.drawn = true;
  }

  clear(): void {
    if (this.drawn) process.stderr.write('\r\x1b[2K');
    this.drawn = false;
  }

  /** A finished line that stays (progress is cleared first). */
  line(text: string): void {
    this.clear();
    process.stderr.write(`${text}\n`);
  }
}
