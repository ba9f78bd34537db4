// A promise-based grpc-js client for InventoryService with protobuf-es messages, one attempt per call: what
// the tests and the benchmark use to see each answer as the server gave it. Services and the CLI use the
// retrying client (shardstock-client.ts) built on it. Built from the same definition the server registers.
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  CompensateRequestSchema,
  CreateCouponRequestSchema,
  DeductRequestSchema,
  GetStockRequestSchema,
  InventoryService,
  ReconcileRequestSchema,
  RestockRequestSchema,
  WatchStockRequestSchema,
  PauseSaleRequestSchema,
  ResumeSaleRequestSchema,
  SetSaleWindowRequestSchema,
  GetDeductionRequestSchema,
  ListAnomaliesRequestSchema,
  ListLedgerRequestSchema,
  type GetDeductionResponse,
  type ListAnomaliesResponse,
  type ListLedgerResponse,
  type PauseSaleResponse,
  type ResumeSaleResponse,
  type SetSaleWindowResponse,
  type CompensateResponse,
  type CreateCouponResponse,
  type DeductResponse,
  type GetStockResponse,
  type ReconcileResponse,
  type RestockResponse,
  type WatchStockResponse,
  ConfirmRequestSchema,
  DeductOrderRequestSchema,
  ExtendHoldRequestSchema,
  ReleaseRequestSchema,
  ReserveOrderRequestSchema,
  ReserveRequestSchema,
  type ConfirmResponse,
  type DeductOrderResponse,
  type ExtendHoldResponse,
  type ReleaseResponse,
  type ReserveOrderResponse,
  type ReserveResponse,
} from '../gen/inventory/v1/inventory_pb.js';
import { serviceDefinition } from '../protocol/grpc-service-definition.js';

export interface CallOptions {
  deadlineMs?: number;
  metadata?: Record<string, string>;
  signal?: AbortSignal;
}

type Init<S extends Parameters<typeof create>[0]> = MessageInitShape<S>;

export interface InventoryClient {
  createCoupon(req: Init<typeof CreateCouponRequestSchema>, o?: CallOptions): Promise<CreateCouponResponse>;
  getStock(req: Init<typeof GetStockRequestSchema>, o?: CallOptions): Promise<GetStockResponse>;
  restock(req: Init<typeof RestockRequestSchema>, o?: CallOptions): Promise<RestockResponse>;
  deduct(req: Init<typeof DeductRequestSchema>, o?: CallOptions): Promise<DeductResponse>;
  compensate(req: Init<typeof CompensateRequestSchema>, o?: CallOptions): Promise<CompensateResponse>;
  reconcile(req: Init<typeof ReconcileRequestSchema>, o?: CallOptions): Promise<ReconcileResponse>;
  watchStock(req: Init<typeof WatchStockRequestSchema>, o?: CallOptions): AsyncIterable<WatchStockResponse>;
  setSaleWindow(req: Init<typeof SetSaleWindowRequestSchema>, o?: CallOptions): Promise<SetSaleWindowResponse>;
  pauseSale(req: Init<typeof PauseSaleRequestSchema>, o?: CallOptions): Promise<PauseSaleResponse>;
  resumeSale(req: Init<typeof ResumeSaleRequestSchema>, o?: CallOptions): Promise<ResumeSaleResponse>;
  getDeduction(req: Init<typeof GetDeductionRequestSchema>, o?: CallOptions): Promise<GetDeductionResponse>;
  listLedger(req: Init<typeof ListLedgerRequestSchema>, o?: CallOptions): Promise<ListLedgerResponse>;
  listAnomalies(req: Init<typeof ListAnomaliesRequestSchema>, o?: CallOptions): Promise<ListAnomaliesResponse>;
  reserve(req: Init<typeof ReserveRequestSchema>, o?: CallOptions): Promise<ReserveResponse>;
  confirm(req: Init<typeof ConfirmRequestSchema>, o?: CallOptions): Promise<ConfirmResponse>;
  release(req: Init<typeof ReleaseRequestSchema>, o?: CallOptions): Promise<ReleaseResponse>;
  extendHold(req: Init<typeof ExtendHoldRequestSchema>, o?: CallOptions): Promise<ExtendHoldResponse>;
  reserveOrder(req: Init<typeof ReserveOrderRequestSchema>, o?: CallOptions): Promise<ReserveOrderResponse>;
  deductOrder(req: Init<typeof DeductOrderRequestSchema>, o?: CallOptions): Promise<DeductOrderResponse>;
  close(): void;
  raw: grpc.Client;
}

const Ctor = grpc.makeGenericClientConstructor(serviceDefinition(InventoryService) as grpc.ServiceDefinition, 'InventoryService');

function meta(o?: CallOptions): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(o?.metadata ?? {})) md.set(k, v);
  return md;
}

function callOpts(o?: CallOptions): grpc.CallOptions {
  return o?.deadlineMs ? { deadline: new Date(Date.now() + o.deadlineMs) } : {};
}

/** Cancels `call` when `signal` aborts; returns the function that stops listening (a long-lived signal
 * would otherwise collect one listener per call). */
function cancelOnAbort(call: { cancel(): void }, signal: AbortSignal | undefined): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    call.cancel();
    return () => {};
  }
  const cancel = () => call.cancel();
  signal.addEventListener('abort', cancel, { once: true });
  return () => signal.removeEventListener('abort', cancel);
}

/** `credentials`: e.g. `grpc.credentials.createSsl(ca, key, cert)` for a TLS / mTLS port; default plaintext.
 * `options`: grpc-js channel options and client options (`interceptors`). */
export function createInventoryClient(
  addr: string,
  options: grpc.ClientOptions = {},
  credentials = grpc.credentials.createInsecure(),
): InventoryClient {
  const raw = new Ctor(addr, credentials, options) as unknown as grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  const unary =
    <Req, Res>(name: string, schema: Parameters<typeof create>[0]) =>
    (req: Req, o?: CallOptions) =>
      new Promise<Res>((resolve, reject) => {
        let stop = () => {};
        const call = raw[name]!.call(raw, create(schema, req as never), meta(o), callOpts(o), (err: grpc.ServiceError | null, res: Res) => {
          stop();
          if (err) reject(err);
          else resolve(res);
        }) as grpc.ClientUnaryCall;
        stop = cancelOnAbort(call, o?.signal);
      });
  return {
    raw,
    createCoupon: unary('createCoupon', CreateCouponRequestSchema),
    getStock: unary('getStock', GetStockRequestSchema),
    restock: unary('restock', RestockRequestSchema),
    deduct: unary('deduct', DeductRequestSchema),
    compensate: unary('compensate', CompensateRequestSchema),
    reconcile: unary('reconcile', ReconcileRequestSchema),
    setSaleWindow: unary('setSaleWindow', SetSaleWindowRequestSchema),
    pauseSale: unary('pauseSale', PauseSaleRequestSchema),
    resumeSale: unary('resumeSale', ResumeSaleRequestSchema),
    getDeduction: unary('getDeduction', GetDeductionRequestSchema),
    listLedger: unary('listLedger', ListLedgerRequestSchema),
    listAnomalies: unary('listAnomalies', ListAnomaliesRequestSchema),
    reserve: unary('reserve', ReserveRequestSchema),
    confirm: unary('confirm', ConfirmRequestSchema),
    release: unary('release', ReleaseRequestSchema),
    extendHold: unary('extendHold', ExtendHoldRequestSchema),
    reserveOrder: unary('reserveOrder', ReserveOrderRequestSchema),
    deductOrder: unary('deductOrder', DeductOrderRequestSchema),
    watchStock(req, o) {
      const call = raw.watchStock!.call(
        raw,
        create(WatchStockRequestSchema, req),
        meta(o),
        callOpts(o),
      ) as grpc.ClientReadableStream<WatchStockResponse>;
      const stop = cancelOnAbort(call, o?.signal);
      // A reader that stops early (break, return, throw) cancels the call: grpc-js alone would leave the
      // stream open on the server.
      return (async function* () {
        try {
          yield* call as AsyncIterable<WatchStockResponse>;
        } finally {
          stop();
          call.cancel();
        }
      })();
    },
    close: () => raw.close(),
  };
}
