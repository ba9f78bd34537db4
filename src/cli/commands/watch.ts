// shardstock watch: a live view of one coupon's level from the WatchStock stream. A server that does not
// serve WatchStock yet (UNIMPLEMENTED) is watched by polling GetStock instead, with a note on stderr.
import { GrpcCode } from '../../protocol/status-codes.js';
import type { RunFn } from '../command.js';
import { fromGrpcError, grpcCodeOf } from '../errors.js';
import { println, type Out } from '../io.js';
import { levelLine, printLevel } from '../level-view.js';
import { flag, int, noMorePositionals, parse, positional } from '../options.js';
import { plainLevel, type PlainLevel } from '../plain.js';
import { fmt, json } from '../render.js';
import { openSession, type Session } from '../session.js';

const changed = (a: PlainLevel | undefined, b: PlainLevel) =>
  !a ||
  a.available !== b.available ||
  a.deducted !== b.deducted ||
  a.settledRemaining !== b.settledRemaining ||
  a.pendingSettlement !== b.pendingSettlement ||
  a.soldOut !== b.soldOut ||
  a.totalStock !== b.totalStock ||
  JSON.stringify(a.shards) !== JSON.stringify(b.shards);

async function* streamLevels(
  s: Session,
  couponId: string,
  intervalMs: number,
  signal: AbortSignal,
  fallback: boolean,
  onFallback: () => void,
): AsyncGenerator<PlainLevel> {
  try {
    for await (const m of s.client.watchStock({ couponId, minIntervalMs: intervalMs }, { ...s.options(), deadlineMs: undefined, signal }))
      yield plainLevel(m.level);
    return;
  } catch (err) {
    if (signal.aborted) return;
    if (!fallback || grpcCodeOf(err) !== GrpcCode.UNIMPLEMENTED) throw fromGrpcError(err, { addr: s.addr, method: 'WatchStock' });
  }
  onFallback();
  let last: PlainLevel | undefined;
  const every = Math.max(200, intervalMs);
  while (!signal.aborted) {
    const r = await s.call('GetStock', (o) => s.client.getStock({ couponId, includeShards: true }, { ...o, signal }));
    const level = plainLevel(r.level);
    if (changed(last, level)) yield level;
    last = level;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, every);
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });
  }
}

/** Redraws a block in place on a terminal: moves up over the previous drawing and clears below it. */
class LiveView {
  private lines = 0;
  constructor(private readonly out: Out) {}
  draw(render: (o: Out) => void): void {
    let text = '';
    render({ write: (s: string) => (text += s), columns: this.out.columns });
    this.out.write((this.lines > 0 ? `\x1b[${this.lines}F\x1b[J` : '') + text);
    this.lines = text.split('\n').length - 1;
  }
}

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, { interval: { type: 'string' }, count: { type: 'string' }, 'no-fallback': { type: 'boolean' } });
  const couponId = positional(p, 0, 'coupon-id');
  noMorePositionals(p, 1);
  const intervalMs = int(p, 'interval', 0, 0, 600_000);
  const count = int(p, 'count', 0, 0, Number.MAX_SAFE_INTEGER);
  const s = openSession(p, io);
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  io.signal.addEventListener('abort', onAbort, { once: true });
  const live = !s.json && io.stdout.isTTY === true ? new LiveView(io.stdout) : undefined;
  let seen = 0;
  let prev: { at: number; deducted: number } | undefined;
  try {
    const levels = streamLevels(s, couponId, intervalMs, stop.signal, !flag(p, 'no-fallback'), () =>
      println(io.stderr, `note: this server does not implement WatchStock yet; polling GetStock every ${Math.max(200, intervalMs)} ms`),
    );
    for await (const level of levels) {
      seen++;
      if (s.json) json(io.stdout, level);
      else if (live) {
        const now = Date.now();
        const rate = prev && now > prev.at ? ((level.deducted - prev.deducted) * 1000) / (now - prev.at) : 0;
        prev = { at: now, deducted: level.deducted };
        live.draw((o) => {
          println(o, `watching ${couponId} on ${s.addr} · update ${fmt(seen)} · ${fmt(Math.round(rate))} units/s · Ctrl-C to stop`);
          println(o);
          printLevel(o, level);
        });
      } else println(io.stdout, levelLine(level));
      if (count > 0 && seen >= count) stop.abort();
    }
    return 0;
  } finally {
    io.signal.removeEventListener('abort', onAbort);
    s.close();
  }
};
