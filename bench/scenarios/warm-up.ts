// A short unmeasured burst per server before its first measured run: the JIT, connection pools and Lua
// script caches warm up here rather than inside the first run of the sweep.
import { CALL_TIMEOUT_MS, type BenchContext } from '../context.js';
import type { DesignRun } from '../designs.js';
import type { ServerHandle } from '../servers.js';

export async function warmUp(ctx: BenchContext, server: ServerHandle, d: DesignRun): Promise<void> {
  const calls = Math.round((ctx.opts.quick ? 500 : 3_000) / (d.slow ? 5 : 1));
  const id = `${ctx.runId}-wu-${d.label}`;
  await server.create([{ id, stock: calls, shards: ctx.opts.shards }]);
  ctx.progress.draw(`warming up ${d.label}`, 0, 1, '');
  await ctx.load.run({
    addr: server.addr,
    client: ctx.opts.client,
    connections: ctx.opts.connections,
    concurrency: 64,
    couponPrefix: id,
    couponCount: 1,
    couponWidth: 0,
    idPrefix: `${id}-`,
    quantity: 1,
    stopOnSoldOut: true,
    maxRequests: calls,
    durationMs: 10_000,
    callTimeoutMs: CALL_TIMEOUT_MS,
    perCoupon: false,
    epochMs: Date.now(),
  });
  ctx.progress.clear();
}
