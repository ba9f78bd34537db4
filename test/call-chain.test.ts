// The one call chain (src/transport/call-chain.ts): gate → instrument → handler, in that order, composed once
// and served by both ports. No Redis, NATS or MySQL here: the handlers are fakes, the ports are real.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { describe, expect, it } from 'vitest';
import { type Caller, CallGate } from '../src/access/call-gate.js';
import { parseTokenEntries, TokenRegistry } from '../src/access/tokens.js';
import { inventoryChain, startTransports } from '../src/app/transports.js';
import { createInventoryClient } from '../src/client/grpc-client.js';
import { loadConfig } from '../src/config.js';
import { DomainError } from '../src/domain/errors.js';
import { DeductOutcome, DeductResponseSchema, InventoryService, WatchStockResponseSchema } from '../src/gen/inventory/v1/inventory_pb.js';
import { Metrics } from '../src/observability/metrics.js';
import { type Admission, type Call, CallChain, type Link } from '../src/transport/call-chain.js';
import type { InventoryHandlers } from '../src/transport/handlers.js';
import { createLogger } from '../src/util/logger.js';

const log = createLogger('silent');
const M = InventoryService.method;
const call = (over: Partial<Call> = {}): Call => ({
  transport: 'grpc',
  signal: new AbortController().signal,
  requestId: undefined,
  authorization: undefined,
  peer: '127.0.0.1:1',
  ...over,
});
const deducted = () => create(DeductResponseSchema, { outcome: DeductOutcome.DEDUCTED, remaining: 1n });

/** An rpc_requests_total sample, read through the registry as /metrics shows it. */
async function requests(m: Metrics, transport: string, method: string, outcome: string): Promise<number> {
  const text = await m.registry.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`shardstock_rpc_requests_total{transport="${transport}",method="${method}",outcome="${outcome}"} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
async function durations(m: Metrics, transport: string, method: string): Promise<number> {
  const text = await m.registry.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`shardstock_rpc_duration_seconds_count{transport="${transport}",method="${method}"} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

/** Records what runs, in order. */
function recorder() {
  const events: string[] = [];
  const gate: Admission = {
    admit(method, caller) {
      events.push(`gate:${method}:${caller.transport}`);
      return () => events.push('gate:release');
    },
  };
  const link = (name: string): Link => ({
    unary: (next) => async (req, c) => {
      events.push(`${name}:in`);
      try {
        return await next(req, c);
      } finally {
        events.push(`${name}:out`);
      }
    },
    stream: (next) =>
      async function* (req, c) {
        events.push(`${name}:in`);
        try {
          yield* next(req, c);
        } finally {
          events.push(`${name}:out`);
        }
      },
  });
  return { events, gate, link };
}

describe('the call chain', () => {
  it('when a call is admitted, then the gate runs first, the links next in their order, the handler last, and the gate releases after all', async () => {
    const { events, gate, link } = recorder();
    const chain = new CallChain(
      {
        deduct: async () => {
          events.push('handler');
          return deducted();
        },
      },
      { gate, links: [link('a'), link('b')] },
    );
    await chain.unary(M.deduct)(create(InventoryService.method.deduct.input, { couponId: 'c' }), call());
    expect(events).toEqual(['gate:Deduct:grpc', 'a:in', 'b:in', 'handler', 'b:out', 'a:out', 'gate:release']);
  });

  it('when the real instrument link is in the chain, then it runs after the gate and before the handler (the stream gauge is 0 at the gate, 1 in the handler)', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const open = async () => (await metrics.watchStreams.get()).values.find((v) => v.labels.transport === 'connect')?.value ?? 0;
    const seen: { at: string; open: number }[] = [];
    let gateOpen: Promise<number> | undefined;
    const gate: Admission = {
      admit() {
        gateOpen = open();
        return () => {};
      },
    };
    const handlers: Partial<InventoryHandlers> = {
      async *watchStock() {
        seen.push({ at: 'handler', open: await open() });
        yield create(WatchStockResponseSchema, {});
      },
    };
    const chain = inventoryChain({ handlers: handlers as InventoryHandlers, gate, metrics, log });
    const sent = [];
    for await (const msg of chain.stream(M.watchStock)({}, call({ transport: 'connect' }))) sent.push(msg);
    expect(sent).toHaveLength(1);
    expect(await gateOpen).toBe(0);
    expect(seen).toEqual([{ at: 'handler', open: 1 }]);
    expect(await open()).toBe(0);
    expect(await requests(metrics, 'connect', 'WatchStock', 'ok')).toBe(1);
  });

  it('when the gate refuses, then the handler never runs, the instrumentation counts the call under its status (not timed), and the error is the refusal', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    let handled = 0;
    const gate = new CallGate({
      tokens: new TokenRegistry(parseTokenEntries(['shop:deduct:deduct-token-0123456789abcdef'], 'test')),
      ratePerSec: 0,
      burst: 0,
      maxInFlight: 0,
    });
    const chain = inventoryChain({
      handlers: {
        deduct: async () => {
          handled++;
          return deducted();
        },
        restock: async () => {
          handled++;
          throw new Error('never');
        },
      } as unknown as InventoryHandlers,
      gate,
      metrics,
      log,
    });
    await expect(chain.unary(M.deduct)({}, call())).rejects.toMatchObject({ kind: 'unauthenticated' });
    await expect(chain.unary(M.restock)({}, call({ authorization: 'Bearer deduct-token-0123456789abcdef' }))).rejects.toMatchObject({
      kind: 'permission_denied',
    });
    expect(handled).toBe(0);
    expect(await requests(metrics, 'grpc', 'Deduct', 'unauthenticated')).toBe(1);
    expect(await requests(metrics, 'grpc', 'Restock', 'permission_denied')).toBe(1);
    expect(await durations(metrics, 'grpc', 'Deduct')).toBe(0);

    // Admitted: counted by its outcome and timed.
    expect(await chain.unary(M.deduct)({}, call({ authorization: 'Bearer deduct-token-0123456789abcdef' }))).toMatchObject({
      outcome: DeductOutcome.DEDUCTED,
    });
    expect(handled).toBe(1);
    expect(await requests(metrics, 'grpc', 'Deduct', 'deducted')).toBe(1);
    expect(await durations(metrics, 'grpc', 'Deduct')).toBe(1);
  });

  it('when a call arrives with its deadline already passed, then nothing behind the gate runs and it is counted as deadline_exceeded', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const { events, gate } = recorder();
    const chain = inventoryChain({ handlers: { deduct: async () => events.push('handler') } as never, gate, metrics, log });
    const ac = new AbortController();
    ac.abort();
    await expect(chain.unary(M.deduct)({}, call({ signal: ac.signal }))).rejects.toMatchObject({ kind: 'deadline_exceeded' });
    expect(events).toEqual([]);
    expect(await requests(metrics, 'grpc', 'Deduct', 'deadline_exceeded')).toBe(1);
  });

  it('when an RPC of the proto has no handler in the set, then it still passes the gate and the instrumentation and answers UNIMPLEMENTED', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const { events, gate } = recorder();
    const chain = inventoryChain({ handlers: {} as InventoryHandlers, gate, metrics, log });
    // Every RPC of the descriptor has a composed step: a new RPC needs only its handler.
    for (const m of InventoryService.methods) {
      if (m.methodKind === 'unary') expect(typeof chain.unary(m)).toBe('function');
      else expect(typeof chain.stream(m)).toBe('function');
    }
    await expect(chain.unary(M.reconcile)({}, call())).rejects.toMatchObject({ kind: 'unimplemented' });
    await expect(chain.stream(M.watchStock)({}, call())[Symbol.asyncIterator]().next()).rejects.toMatchObject({ kind: 'unimplemented' });
    expect(events).toEqual(['gate:Reconcile:grpc', 'gate:release', 'gate:WatchStock:grpc', 'gate:release']);
    expect(await requests(metrics, 'grpc', 'Reconcile', 'unimplemented')).toBe(1);
    expect(await requests(metrics, 'grpc', 'WatchStock', 'unimplemented')).toBe(1);
  });
});

describe('both ports serve the same chain', () => {
  it('when calls come in on the gRPC and the Connect port, then the one chain built by startTransports runs them all: one gate, one set of counters, the same Call shape', async () => {
    const config = loadConfig({ SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0', SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0', SHARDSTOCK_REFLECTION: 'off' });
    const metrics = new Metrics({ defaultMetrics: false });
    const admitted: Caller[] = [];
    const seen: Call[] = [];
    const gate: Admission = {
      admit(method: string, caller: Caller) {
        admitted.push({ transport: caller.transport, authorization: caller.authorization, peer: caller.peer });
        if (caller.authorization !== 'Bearer ok') throw new DomainError('unauthenticated', `no token for ${method}`);
        return () => {};
      },
    };
    const handlers = {
      async deduct(_req: unknown, ctx: Call) {
        seen.push(ctx);
        return deducted();
      },
    } as unknown as InventoryHandlers;
    const { grpc, http, chain } = await startTransports(config, { handlers, plain: [], gate, metrics, log, refused: () => () => {} });
    const client = createInventoryClient(`127.0.0.1:${grpc.port}`);
    const connect = createClient(
      InventoryService,
      createConnectTransport({ baseUrl: `http://127.0.0.1:${http.port}`, httpVersion: '1.1' }),
    );
    try {
      expect(grpc.chain).toBe(chain);
      await client.deduct({ couponId: 'c', requestId: 'g' }, { metadata: { authorization: 'Bearer ok', 'x-request-id': 'rid-g' } });
      await connect.deduct({ couponId: 'c', requestId: 'c' }, { headers: { authorization: 'Bearer ok', 'x-request-id': 'rid-c' } });
      await expect(client.deduct({ couponId: 'c', requestId: 'g2' })).rejects.toMatchObject({ code: Code.Unauthenticated });
      const refused = await connect.deduct({ couponId: 'c', requestId: 'c2' }).catch((e) => ConnectError.from(e));
      expect((refused as ConnectError).code).toBe(Code.Unauthenticated);

      expect(admitted.map((a) => [a.transport, a.authorization])).toEqual([
        ['grpc', 'Bearer ok'],
        ['connect', 'Bearer ok'],
        ['grpc', undefined],
        ['connect', undefined],
      ]);
      expect(admitted.every((a) => /127\.0\.0\.1/.test(a.peer))).toBe(true);
      expect(seen.map((c) => [c.transport, c.requestId])).toEqual([
        ['grpc', 'rid-g'],
        ['connect', 'rid-c'],
      ]);
      for (const t of ['grpc', 'connect']) {
        expect(await requests(metrics, t, 'Deduct', 'deducted')).toBe(1);
        expect(await requests(metrics, t, 'Deduct', 'unauthenticated')).toBe(1);
      }
    } finally {
      client.close();
      grpc.server.forceShutdown();
      await http.close(0);
    }
  });
});

describe('the client loads no server module', () => {
  it('when the import graph of src/client is followed, then it never reaches src/transport, src/domain, src/app or src/observability', () => {
    const root = resolve(import.meta.dirname, '..');
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
        visit(resolve(dirname(file), m[1]!.replace(/\.js$/, '.ts')));
      }
    };
    visit(join(root, 'src/client/index.ts'));
    const reached = [...seen].map((f) => f.slice(root.length + 1));
    expect(reached).toContain('src/protocol/grpc-service-definition.ts');
    expect(reached.filter((f) => /^src\/(transport|domain|app|observability)\//.test(f))).toEqual([]);
  });
});
