// Cost of the call chain per call, in isolation: a Deduct whose handler answers at once, called bare and
// through the chain (no links, gate link, instrument link, both: what both ports run), in one process, no
// transport. Reports the median ns per call and the bytes allocated per call (heap growth over rounds in which
// no GC ran). `node --expose-gc --max-semi-space-size=1024 --min-semi-space-size=1024 --import tsx
// bench/chain-overhead.ts [calls] [rounds]`; timings are only worth reading on a quiet machine.
import { PerformanceObserver } from 'node:perf_hooks';
import { create } from '@bufbuild/protobuf';
import { CallGate } from '../src/access/call-gate.js';
import { DeductOutcome, DeductRequestSchema, DeductResponseSchema, InventoryService } from '../src/gen/inventory/v1/inventory_pb.js';
import { instrumentCalls } from '../src/observability/instrument-link.js';
import { Metrics } from '../src/observability/metrics.js';
import { type Call, CallChain } from '../src/transport/call-chain.js';
import type { InventoryHandlers } from '../src/transport/handlers.js';
import { createLogger } from '../src/util/logger.js';

const N = Number(process.argv[2] ?? 100_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc (see the header)');

const res = create(DeductResponseSchema, { outcome: DeductOutcome.DEDUCTED, remaining: 1n });
const req = create(DeductRequestSchema, { couponId: 'c', requestId: 'r', userId: 'u', quantity: 1n });
const handlers = { deduct: async () => res } as unknown as InventoryHandlers;
const signal = new AbortController().signal;
// The one object a port builds per call.
const callOf = (): Call => ({ transport: 'grpc', signal, requestId: undefined, authorization: undefined, peer: '127.0.0.1:5000' });
const log = createLogger('info');
const method = InventoryService.method.deduct;
const gate = () => new CallGate({ ratePerSec: 0, burst: 0, maxInFlight: 4096 });
const instrument = () => instrumentCalls({ metrics: new Metrics({ defaultMetrics: false }), log });
const both = instrument();

const paths: [string, (req: unknown, call: Call) => Promise<unknown>][] = [
  ['handler, bare', (r, c) => handlers.deduct(r as never, c)],
  ['chain: no links', new CallChain(handlers).unary(method)],
  ['chain: gate link', new CallChain(handlers, { gate: gate() }).unary(method)],
  ['chain: instrument link', new CallChain(handlers, { links: [instrument().link] }).unary(method)],
  ['chain: gate + instrument', new CallChain(handlers, { gate: gate(), links: [both.link], onRefused: both.refusedBy }).unary(method)],
];

let gcs = 0;
new PerformanceObserver((l) => {
  gcs += l.getEntries().length;
}).observe({ entryTypes: ['gc'] });
const pause = () => new Promise((r) => setTimeout(r, 10));
const results = new Map<string, { ns: number[]; bytes: number[] }>();

for (let round = 0; round < ROUNDS; round++) {
  for (const [name, step] of paths) {
    for (let i = 0; i < 20_000; i++) await step(req, callOf());
    gc();
    await pause();
    const gcsBefore = gcs;
    const heap = process.memoryUsage().heapUsed;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) await step(req, callOf());
    const ns = Number(process.hrtime.bigint() - t0) / N;
    const bytes = (process.memoryUsage().heapUsed - heap) / N;
    await pause();
    const r = results.get(name) ?? { ns: [], bytes: [] };
    r.ns.push(ns);
    if (gcs === gcsBefore) r.bytes.push(bytes);
    results.set(name, r);
  }
}
const median = (a: number[]) => (a.length ? [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]! : Number.NaN);
for (const [name, r] of results) {
  console.log(
    `${name.padEnd(26)} ${median(r.ns).toFixed(0).padStart(6)} ns/call ${median(r.bytes).toFixed(0).padStart(6)} B/call` +
      `   (ns per round: ${r.ns.map((x) => x.toFixed(0)).join(' ')}; rounds without GC: ${r.bytes.length}/${r.ns.length})`,
  );
}
