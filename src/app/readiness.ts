// Whether this instance can do its job right now: Redis Cluster, NATS and MySQL each answer a ping. Polled,
// so /readyz, grpc.health.v1 and metrics all read the same cached answer and a probe never piles up calls.
// Only critical dependencies decide readiness: Deduct and Compensate need Redis alone (events wait in the
// outbox while NATS or MySQL are away), so an outage there must not pull every instance out of rotation
// and stop the sale; it shows as `degraded` instead.
import { redactUrls } from '../util/redact.js';

export interface Dependency {
  name: string;
  ping(): Promise<unknown>;
  /** Default true. */
  critical?: boolean;
}

export interface ReadinessState {
  ready: boolean;
  /** Non-critical dependencies that do not answer: serving goes on, settlement or admin calls wait. */
  degraded: string[];
  checks: Record<string, { ok: boolean; error?: string; checkedAt: string }>;
}

export class Readiness {
  private state: ReadinessState = { ready: false, degraded: [], checks: {} };
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<(ready: boolean) => void>();

  constructor(
    private readonly deps: Dependency[],
    private readonly intervalMs = 1000,
    private readonly timeoutMs = 1500,
  ) {}

  current(): ReadinessState {
    return this.state;
  }

  /** What /readyz shows: which dependency fails, never its raw error (hosts, users, driver internals); the
   *  error goes to the logs (app.ts logs every change). */
  publicView(): { ready: boolean; degraded: string[]; failing: string[]; checks: Record<string, { ok: boolean; checkedAt: string }> } {
    const { ready, degraded, checks } = this.state;
    return {
      ready,
      degraded,
      failing: Object.entries(checks)
        .filter(([, c]) => !c.ok)
        .map(([name]) => name),
      checks: Object.fromEntries(Object.entries(checks).map(([name, c]) => [name, { ok: c.ok, checkedAt: c.checkedAt }])),
    };
  }

  onChange(listener: (ready: boolean) => void): void {
    this.listeners.add(listener);
  }

  async check(): Promise<ReadinessState> {
    const checks: ReadinessState['checks'] = {};
    await Promise.all(
      this.deps.map(async (d) => {
        const checkedAt = new Date().toISOString();
        try {
          await Promise.race([
            d.ping(),
            new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), this.timeoutMs).unref()),
          ]);
          checks[d.name] = { ok: true, checkedAt };
        } catch (err) {
          checks[d.name] = { ok: false, error: redactUrls(String((err as Error)?.message ?? err)), checkedAt };
        }
      }),
    );
    const ready = this.deps.every((d) => d.critical === false || checks[d.name]?.ok);
    const degraded = this.deps.filter((d) => d.critical === false && !checks[d.name]?.ok).map((d) => d.name);
    const changed = ready !== this.state.ready;
    this.state = { ready, degraded, checks };
    if (changed) for (const l of this.listeners) l(ready);
    return this.state;
  }

  start(): void {
    const tick = () => {
      void this.check().finally(() => {
        if (this.timer) this.timer = setTimeout(tick, this.intervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
