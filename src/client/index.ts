// shardstock's client for internal services: `import { createShardstockClient } from 'shardstock/client'`
// (package.json "exports"). Everything a caller needs, and nothing of the server.
export {
  createShardstockClient,
  type CallOptions,
  type Attempted,
  type Counted,
  type RetryEvent,
  type ShardstockClient,
  type ShardstockClientOptions,
  type TlsOptions,
} from './shardstock-client.js';
export { ShardstockCallError, PlaintextTokenError } from './call-error.js';
export { DEFAULT_RETRY_POLICY, type RetryPolicy } from './retry-policy.js';
export { isLoopbackTarget } from './loopback.js';
export {
  CompensateOutcome,
  DeductOutcome,
  type CompensateResponse,
  type CreateCouponResponse,
  type DeductResponse,
  type GetStockResponse,
  type ReconcileResponse,
  type RestockResponse,
  type StockLevel,
  type WatchStockResponse,
} from '../gen/inventory/v1/inventory_pb.js';
