// What the orchestrator asks a load-generator process to do, and what it gets back (sent over the IPC
// channel with `serialization: 'advanced'`, so typed arrays travel as they are).

export interface LoadJob {
  /** host:port of the gRPC server under test. */
  addr: string;
  client: 'http2' | 'grpc-js';
  connections: number;
  /** Requests kept in flight by this process. */
  concurrency: number;
  /** Coupon ids are `couponPrefix` + the index zero-padded to `couponWidth` digits (no digits when count is 1);
   *  request i goes to coupon i mod couponCount. */
  couponPrefix: string;
  couponCount: number;
  couponWidth: number;
  /** Request ids are `<idPrefix>r<seq>` and users `<idPrefix>u<seq>`: every request a distinct user. */
  idPrefix: string;
  quantity: number;
  /** Stop sending when an answer says SOLD_OUT (a flash sale runs until sold out). */
  stopOnSoldOut: boolean;
  maxRequests: number;
  durationMs: number;
  callTimeoutMs: number;
  /** Count successes per coupon (many-coupons oversell check). */
  perCoupon: boolean;
  /** Shared clock origin (epoch ms) for `successBuckets`. */
  epochMs: number;
}

export interface LoadProgress {
  type: 'progress';
  completed: number;
  deducted: number;
  soldOut: number;
  errors: number;
}

export interface LoadResult {
  type: 'result';
  sent: number;
  completed: number;
  /** Answers by DeductOutcome name (DEDUCTED, SOLD_OUT, INSUFFICIENT, ...). */
  outcomes: Record<string, number>;
  /** Failed calls by gRPC status code name (or `transport`). */
  errors: Record<string, number>;
  histogram: Uint32Array;
  maxUs: number;
  startedAtMs: number;
  elapsedMs: number;
  /** Completed calls in each second of the run. */
  perSecond: number[];
  /** Successful deductions per 10 ms since `epochMs` (settlement lag). */
  successBuckets: Uint32Array;
  perCoupon?: Uint32Array | undefined;
  /** CPU this process spent during the run, µs. */
  cpuUserUs: number;
  cpuSystemUs: number;
  firstError?: string | undefined;
}

export const SUCCESS_BUCKET_MS = 10;
