// WatchStock at scale and over time: a thousand streams on one instance share one NATS subscription, and
// streams that end for any reason (cancel, deadline, dropped connection) leave nothing behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as netConnect } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { status, type ServiceError } from '@grpc/grpc-js';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { InventoryService } from '../src/gen/inventory/v1/inventory_pb.js';
import { createInventoryClient } from '../src/client/grpc-client.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let t: TestApp;
beforeAll(async () => {
  // Every stream here comes from one peer (127.0.0.1): lift the per-caller stream cap above the 1,000 measured.
  t = await startTestApp({ SHARDSTOCK_MAX_STREAMS_PER_CALLER: '5000' });
});
afterAll(async () => {
  await t?.close();
});

async function waitUntil(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** NATS subscriptions the instance's connection really holds (nats.js keeps them in its protocol handler). */
const natsSubs = () => (t.app.nats as unknown as { protocol: { subscriptions: { size(): number } } }).protocol.subscriptions.size();
/** A client on its own HTTP/2 connection (grpc-js shares one between clients of the same target by default). */
const ownConnection = () => createInventoryClient(t.grpcAddr, { 'grpc.use_local_subchannel_pool': 1 });
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
/** The most timers alive over 1.2 s: the Redis client's slot-refresh timer is re-armed every second and is
 * missing while its refresh is in flight, so one sample can read one low. */
async function timersAtRest(): Promise<number> {
  let most = 0;
  for (const until = Date.now() + 1200; Date.now() < until; ) {
    most = Math.max(most, timers());
    await new Promise((r) => setTimeout(r, 5));
  }
  return most;
}
const heapAfterGc = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const allFreed = () => {
  const s = t.app.watch.stats();
  return s.streams === 0 && s.feeds === 0 && s.timers === 0 && t.app.levels.subscriptions === 0;
};

/** Opens a Connect stream over a raw HTTP/1.1 socket, waits for its first message, then drops the connection. */
function streamThenDrop(couponId: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify({ couponId }));
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    body.copy(frame, 5);
    const socket = netConnect(t.app.httpPort, '127.0.0.1', () => {
      socket.write(
        `POST /inventory.v1.InventoryService/WatchStock HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/connect+json\r\n` +
          `connect-protocol-version: 1\r\ncontent-length: ${frame.length}\r\n\r\n`,
      );
      socket.write(frame);
    });
    let got = '';
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('"level"')) {
        socket.destroy();
        resolve();
      }
    });
    socket.on('error', reject);
  });
}

describe('WatchStock resources', () => {
  it('when 1,000 streams watch one coupon on one instance, then one NATS subscription serves them all and every stream sees the next change', async () => {
    const id = uniqueId('many');
    await t.client.createCoupon({ couponId: id, totalStock: 5000n, shardCount: 8 });
    const subsBefore = natsSubs();
    const heapBefore = heapAfterGc();
    const ac = new AbortController();
    const firstSeen: Promise<void>[] = [];
    const changeSeen: Promise<void>[] = [];
    // Ten connections of 100 streams: the server allows 100 concurrent streams per connection
    // (SHARDSTOCK_MAX_STREAMS_PER_CONNECTION), and cancelling a thousand streams at once on one HTTP/2
    // connection is what nghttp2's rapid-reset protection (CVE-2023-44487) rightly answers by closing it.
    const clients = Array.from({ length: 10 }, () => ownConnection());
    const started = Date.now();
    for (let i = 0; i < 1000; i++) {
      let first!: () => void;
      firstSeen.push(new Promise((r) => (first = r)));
      changeSeen.push(
        (async () => {
          for await (const m of clients[i % 10]!.watchStock({ couponId: id }, { signal: ac.signal })) {
            if (m.level!.available === 5000n) first();
            if (m.level!.available === 4999n) return;
          }
        })(),
      );
    }
    await Promise.all(firstSeen);
    const openMs = Date.now() - started;
    const s = t.app.watch.stats();
    expect(s.streams).toBe(1000);
    expect(s.feeds).toBe(1);
    expect(t.app.levels.subscriptions).toBe(1);
    expect(natsSubs() - subsBefore).toBe(1);
    const heapPerStream = (heapAfterGc() - heapBefore) / 1000;

    const changeAt = Date.now();
    await t.client.deduct({ couponId: id, requestId: 'one', quantity: 1n });
    await Promise.all(changeSeen);
    const fanoutMs = Date.now() - changeAt;
    console.log(
      `1,000 streams: opened (first level each) in ${openMs} ms, ~${Math.round(heapPerStream)} B heap per stream, one change reached all in ${fanoutMs} ms`,
    );

    ac.abort();
    await waitUntil('every stream to be freed', allFreed);
    expect(natsSubs()).toBe(subsBefore);
    for (const c of clients) c.close();
  });

  it('when 1,000 streams are opened and cancelled (gRPC, Connect, deadlines, dropped connections), then listeners, timers, NATS subscriptions and memory do not grow', async () => {
    const id = uniqueId('cycle');
    await t.client.createCoupon({ couponId: id, totalStock: 100n, shardCount: 2 });
    const connect = createClient(InventoryService, createConnectTransport({ baseUrl: t.httpUrl, httpVersion: '1.1' }));
    // Each phase on a fresh connection: more than ~1,000 cancels on one connection at more than ~33/s trip
    // nghttp2's rapid-reset limit, which closes that connection (see docs/observability.md).
    let client = ownConnection();
    const fresh = () => {
      client.close();
      client = ownConnection();
    };
    const grpcCycle = async () => {
      const ac = new AbortController();
      for await (const _ of client.watchStock({ couponId: id }, { signal: ac.signal })) break;
      ac.abort();
    };
    const connectCycle = async () => {
      const ac = new AbortController();
      try {
        for await (const _ of connect.watchStock({ couponId: id }, { signal: ac.signal })) ac.abort();
      } catch (e) {
        if (ConnectError.from(e).code !== Code.Canceled) throw e;
      }
    };
    const run = async (n: number, concurrency: number, cycle: () => Promise<void>) => {
      for (let i = 0; i < n; i += concurrency) await Promise.all(Array.from({ length: Math.min(concurrency, n - i) }, cycle));
    };
    // Warm up every path (lazy module state, JIT, connection pools: ~0.7 MiB over the first few hundred
    // calls of any kind, then flat), then measure.
    await run(300, 5, grpcCycle);
    await run(150, 5, connectCycle);
    fresh();
    await waitUntil('warm-up streams to be freed', allFreed);
    const subsBefore = natsSubs();
    const timersBefore = await timersAtRest();
    const heapBefore = heapAfterGc();
    const openedBefore = t.app.watch.opened;

    await run(400, 1, grpcCycle); // one at a time: each cycle creates and closes the coupon's feed
    fresh();
    await run(300, 25, grpcCycle);
    fresh();
    await run(200, 10, connectCycle);
    await Promise.all(Array.from({ length: 50 }, () => streamThenDrop(id)));
    // Deadlines: the server ends the stream itself.
    const deadlineCodes = await Promise.all(
      Array.from({ length: 50 }, async () => {
        try {
          for await (const _ of client.watchStock({ couponId: id }, { deadlineMs: 300 }));
          return 'ended';
        } catch (e) {
          return (e as ServiceError).code;
        }
      }),
    );
    expect(deadlineCodes.every((c) => c === status.DEADLINE_EXCEEDED)).toBe(true);

    await waitUntil('every stream to be freed', allFreed);
    expect(t.app.watch.opened - openedBefore).toBe(1000);
    expect(t.app.watch.ended).toBe(t.app.watch.opened);
    expect(natsSubs()).toBe(subsBefore);
    // Timers of calls that just ended (deadline timers, HTTP/2 session timers) are cleared a few turns later on a
    // busy machine; a leaked one never is, so wait for the count to come back rather than sample it once.
    const timersAfterEnd = timers();
    await waitUntil(
      `timers to come back to ${timersBefore} (${timersAfterEnd} when the streams ended)`,
      () => timers() <= timersBefore,
      10_000,
    );
    const growth = heapAfterGc() - heapBefore;
    console.log(
      `1,000 subscribe/cancel cycles: heap ${growth >= 0 ? '+' : ''}${Math.round(growth / 1024)} KiB, timers ${timersBefore} -> ${timersAfterEnd} as the streams ended -> ${timers()}, NATS subscriptions ${subsBefore} -> ${natsSubs()}`,
    );
    // A leak of even one slot or closure per stream would be well over this.
    expect(growth).toBeLessThan(2 * 1024 * 1024);
    client.close();
  });
});
