// SIGTERM: the process stops accepting, finishes the calls in flight, closes every connection and exits 0.
import { describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import { createInventoryClient } from '../src/client/grpc-client.js';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { TEST_DB_URL, uniqueId } from './support/harness.js';
import { freePort } from './support/ports.js';
import { spawnTs } from './support/processes.js';

describe('graceful shutdown', () => {
  it('when SIGTERM arrives under load, then calls already accepted complete and the process exits 0', async () => {
    const [grpcPort, httpPort] = [await freePort(), await freePort()];
    const child = spawnTs('src/main.ts', [], {
      SHARDSTOCK_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
      SHARDSTOCK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
      SHARDSTOCK_MYSQL_URL: TEST_DB_URL,
      SHARDSTOCK_NAMESPACE: uniqueId('sd'),
      SHARDSTOCK_WORKERS: 'none',
      SHARDSTOCK_LOG_LEVEL: 'info',
    });
    let logs = '';
    child.stdout!.on('data', (d) => (logs += d));
    child.stderr!.on('data', (d) => (logs += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const deadline = Date.now() + 30_000;
    while (!logs.includes('shardstock serving')) {
      if (Date.now() > deadline) throw new Error(`service did not start: ${logs}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const client = createInventoryClient(`127.0.0.1:${grpcPort}`);
    const id = uniqueId();
    await client.createCoupon({ couponId: id, totalStock: 100_000n, shardCount: 4 });
    // Keep many calls in flight, then signal.
    const inflight = Array.from({ length: 300 }, (_, i) =>
      client.deduct({ couponId: id, requestId: `r${i}` }).then(
        (r) => (r.outcome === DeductOutcome.DEDUCTED ? 'ok' : 'refused'),
        (e: ServiceError) => status[e.code],
      ),
    );
    await new Promise((r) => setTimeout(r, 5));
    child.kill('SIGTERM');
    const results = await Promise.all(inflight);
    expect(await exited).toBe(0);
    expect(logs).toContain('shardstock stopped');
    // Every call either completed or was refused before it was accepted — none was cut half-way.
    const ok = results.filter((r) => r === 'ok').length;
    expect(ok).toBeGreaterThan(0);
    for (const r of results) expect(['ok', 'UNAVAILABLE', 'CANCELLED']).toContain(r);
    // And the port is really closed.
    const after = await client.getStock({ couponId: id }, { deadlineMs: 1000 }).then(
      () => 'answered',
      (e: ServiceError) => e.code,
    );
    expect(after).not.toBe('answered');
    client.close();
  });
});
