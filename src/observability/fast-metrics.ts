// Counters and histograms for the call path. prom-client hashes a label object on every inc/observe
// (measured ~1.4 µs for one counter inc + one histogram observe); these resolve a child once per label
// tuple and then cost an array increment (~20 ns). They plug into a prom-client Registry as ordinary
// metrics (the registry only asks a metric for its name, help, type and values at scrape time).
import type { Registry } from 'prom-client';

type Sample = { labels: Record<string, string | number>; value: number; metricName?: string };

interface Exported {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: 'sum' }>;
  reset(): void;
}

abstract class Family<C> implements Exported {
  abstract readonly type: 'counter' | 'histogram';
  protected readonly children = new Map<string, { labels: Record<string, string>; child: C }>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  /** The child for these label values (in labelNames order); keep it: looking it up is the slow part. */
  child(...values: string[]): C {
    const key = values.join('\u0001');
    let entry = this.children.get(key);
    if (!entry) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => {
        labels[n] = values[i] ?? '';
      });
      entry = { labels, child: this.make() };
      this.children.set(key, entry);
    }
    return entry.child;
  }

  protected abstract make(): C;
  protected abstract samples(labels: Record<string, string>, child: C): Sample[];

  async get() {
    const values: Sample[] = [];
    for (const { labels, child } of this.children.values()) values.push(...this.samples(labels, child));
    return { name: this.name, help: this.help, type: this.type, values, aggregator: 'sum' as const };
  }

  reset(): void {
    this.children.clear();
  }
}

export class CounterChild {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

export class FastCounter extends Family<CounterChild> {
  readonly type = 'counter';
  protected make() {
    return new CounterChild();
  }
  protected samples(labels: Record<string, string>, c: CounterChild): Sample[] {
    return [{ labels, value: c.value }];
  }
}

export class HistogramChild {
  /** counts[i]: observations <= bounds[i] and > bounds[i-1]; the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

export class FastHistogram extends Family<HistogramChild> {
  readonly type = 'histogram';
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    super(name, help, labelNames, registry);
  }
  protected make() {
    return new HistogramChild(this.bounds);
  }
  protected samples(labels: Record<string, string>, h: HistogramChild): Sample[] {
    const out: Sample[] = [];
    let acc = 0;
    this.bounds.forEach((le, i) => {
      acc += h.counts[i]!;
      out.push({ labels: { ...labels, le }, value: acc, metricName: `${this.name}_bucket` });
    });
    out.push({ labels: { ...labels, le: '+Inf' }, value: h.count, metricName: `${this.name}_bucket` });
    out.push({ labels, value: h.sum, metricName: `${this.name}_sum` });
    out.push({ labels, value: h.count, metricName: `${this.name}_count` });
    return out;
  }
}
