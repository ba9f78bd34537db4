// A progress bar on stderr for long work (load runs). Drawn only on a terminal, at most ~10 times a second;
// scripts piping the output see nothing of it.
import { bar, fmt } from './render.js';
import type { Out } from './io.js';

export class ProgressBar {
  private last = 0;
  private readonly started = Date.now();
  private drawn = false;

  constructor(
    private readonly out: Out,
    private readonly total: number,
    private readonly label: string,
    private readonly enabled = out.isTTY === true,
  ) {}

  update(done: number, extra = ''): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (now - this.last < 100 && done < this.total) return;
    this.last = now;
    const elapsed = (now - this.started) / 1000;
    const rate = elapsed > 0 ? done / elapsed : 0;
    const eta = rate > 0 ? Math.ceil((this.total - done) / rate) : 0;
    const pct = this.total > 0 ? Math.floor((done / this.total) * 100) : 100;
    const width = Math.max(10, Math.min(40, (this.out.columns ?? 80) - 60));
    this.out.write(
      `\r\x1b[2K${this.label} ${bar(done, this.total, width)} ${fmt(done)}/${fmt(this.total)} ${pct}%  ${fmt(Math.round(rate))}/s  eta ${eta}s ${extra}`,
    );
    this.drawn = true;
  }

  done(): void {
    if (this.drawn) this.out.write('\r\x1b[2K');
  }
}
