// A load-generator process: keeps `concurrency` Deduct calls in flight over a few HTTP/2 connections, every
// request a distinct request id and user, and reports counts, a latency histogram and its own CPU.
// Started by bench/load.ts with an IPC channel; one job at a time: {type:'run', job} -> progress* -> result.
import { performance } from 'node:perf_hooks';
import { fromBinary } from '@bufbuild/protobuf';
import { DeductOutcome, DeductResponseSchema } from '../src/gen/inventory/v1/inventory_pb.js';
import { Histogram } from './histogram.js';
import { SUCCESS_BUCKET_MS, type LoadJob, type LoadProgress, type LoadResult } from './load-types.js';
import { DeductTemplate } from './request-template.js';
import { grpcJsTransport, rawHttp2Transport, type LoadTransport } from './load-transport.js';
import { statusName } from '../src/protocol/status-codes.js';

let stopRequested = false;
const MAX_FAILURES_IN_A_ROW = 2_000;

function run(job: LoadJob): Promise<LoadResult> {
  stopRequested = false;
  const transport: LoadTransport =
    job.client === 'grpc-js'
      ? grpcJsTransport(job.addr, job.connections, job.callTimeoutMs)
      : rawHttp2Transport(job.addr, job.connections, job.callTimeoutMs);
  const template = new DeductTemplate({
    couponPrefix: job.couponPrefix,
    couponWidth: job.couponWidth,
    idPrefix: job.idPrefix,
    quantity: job.quantity,
  });
  const hist = new Histogram();
  const outcomes: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const perSecond: number[] = [];
  const successBuckets = new Uint32Array(Math.ceil((job.durationMs + 120_000) / SUCCESS_BUCKET_MS));
  const perCoupon = job.perCoupon ? new Uint32Array(job.couponCount) : undefined;
  let firstError: string | undefined;
  let sent = 0;
  let completed = 0;
  let deducted = 0;
  let soldOut = 0;
  let failed = 0;
  let failedInARow = 0;
  let stopping = false;

  return new Promise((resolve) => {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const startedAtMs = Date.now();
    const deadline = setTimeout(() => (stopping = true), job.durationMs);
    const progress = setInterval(() => {
      const p: LoadProgress = { type: 'progress', completed, deducted, soldOut, errors: failed };
      process.send!(p);
    }, 200);
    let lanes = job.concurrency;

    const finish = () => {
      clearTimeout(deadline);
      clearInterval(progress);
      const elapsedMs = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      transport.close();
      resolve({
        type: 'result',
        sent,
        completed,
        outcomes,
        errors,
        histogram: hist.counts,
        maxUs: hist.maxUs,
        startedAtMs,
        elapsedMs,
        perSecond,
        successBuckets,
        perCoupon,
        cpuUserUs: cpu.user,
        cpuSystemUs: cpu.system,
        firstError,
      });
    };

    const fire = () => {
      if (stopping || stopRequested || sent >= job.maxRequests) {
        if (--lanes === 0) finish();
        return;
      }
      const seq = sent++;
      const couponIndex = seq % job.couponCount;
      const start = performance.now();
      transport.send(template.frameFor(seq, couponIndex), (status, body, detail) => {
        const now = performance.now();
        hist.record((now - start) * 1000);
        completed++;
        const sec = Math.floor((now - t0) / 1000);
        perSecond[sec] = (perSecond[sec] ?? 0) + 1;
        if (status === 0 && body) {
          failedInARow = 0;
          const outcome = fromBinary(DeductResponseSchema, body).outcome;
          const name = DeductOutcome[outcome] ?? String(outcome);
          outcomes[name] = (outcomes[name] ?? 0) + 1;
          if (outcome === DeductOutcome.DEDUCTED) {
            deducted++;
            if (perCoupon) perCoupon[couponIndex]!++;
            const b = Math.floor((Date.now() - job.epochMs) / SUCCESS_BUCKET_MS);
            if (b >= 0 && b < successBuckets.length) successBuckets[b]!++;
          } else if (outcome === DeductOutcome.SOLD_OUT) {
            soldOut++;
            if (job.stopOnSoldOut) stopping = true;
          }
        } else {
          failed++;
          const name = status < 0 ? 'transport' : statusName(status);
          errors[name] = (errors[name] ?? 0) + 1;
          firstError ??= `${name}: ${detail ?? ''}`;
          // A server that is gone answers nothing but failures: end the run instead of spinning.
          if (++failedInARow >= MAX_FAILURES_IN_A_ROW) stopping = true;
        }
        fire();
      });
    };
    for (let i = 0; i < job.concurrency; i++) fire();
  });
}

process.on('message', (msg: { type: 'run'; job: LoadJob } | { type: 'stop' } | { type: 'exit' }) => {
  if (msg.type === 'stop') stopRequested = true;
  else if (msg.type === 'exit') process.disconnect();
  else void run(msg.job).then((r) => process.send!(r));
});
process.send!({ type: 'ready' });
