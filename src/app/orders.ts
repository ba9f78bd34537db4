// Orders of several items (docs/orders.md), built over holds: the order records in Redis, the coordinator
// and the sweeper that ends orders whose caller died.
import type { Cluster } from 'ioredis';
import type { Config } from '../config.js';
import type { CompensateService } from '../domain/compensate.js';
import type { CouponCatalog } from '../domain/coupon-catalog.js';
import type { HoldTtl } from '../domain/hold-service.js';
import type { Holds } from '../domain/holds.js';
import { orderHoldsOver } from '../domain/order-holds.js';
import { OrderSweeper } from '../domain/order-sweeper.js';
import { OrderService } from '../domain/orders.js';
import type { OrderRecords } from '../domain/ports.js';
import type { FailoverFence } from '../redis/failover-fence.js';
import { RedisOrderRecords } from '../redis/order-records.js';
import type { ReplicaAck } from '../redis/replica-ack.js';
import { guardErrors } from '../util/guard-errors.js';

/** Expired holds are released within about a second (holds' sweep): the sweeper waits this much longer. */
const EXPIRY_SLACK_MS = 1000;

export function buildOrders(
  config: Readonly<Config>,
  redis: Cluster,
  d: {
    holds: Holds;
    /** The holds' TTL bounds as the HoldService applies them (capped at half the idempotency window): an order
     * checks ttl_ms and fills in its default with these, or every item's Reserve refuses what the order let in. */
    holdTtl: HoldTtl;
    compensate: CompensateService;
    catalog: CouponCatalog;
    replicaAck: ReplicaAck | undefined;
    fence: FailoverFence | undefined;
    onError: (what: string, err: unknown) => void;
  },
) {
  const records: OrderRecords = guardErrors(
    new RedisOrderRecords(redis, {
      namespace: config.namespace,
      idempotencyWindowS: config.idempotencyWindowS,
      replicaAck: d.replicaAck,
      fence: d.fence,
    }),
    'Redis',
  );
  const orders = new OrderService({
    holds: orderHoldsOver(d.holds, d.compensate, d.catalog),
    records,
    coupon: (id) => d.catalog.get(id),
    settings: {
      maxItems: config.maxOrderItems,
      maxQuantity: config.maxQuantity,
      ttl: d.holdTtl,
      commitMarginMs: config.orderCommitMarginMs,
      finishAfterMs: 2 * config.orderSweepMs,
      graceMs: config.holdSweepMs + EXPIRY_SLACK_MS,
      abandonAfterMs: config.orderAbandonMs,
    },
    onError: d.onError,
  });
  const sweeper = new OrderSweeper(orders, records, d.onError);
  return { orders, orderSweeper: sweeper, orderRecords: records };
}
