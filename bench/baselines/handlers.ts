// InventoryHandlers for a baseline: Deduct, CreateCoupon and GetStock go to the baseline's store; every other
// method is UNIMPLEMENTED. Served by the same startGrpcServer as the service, so only the store differs.
import { create } from '@bufbuild/protobuf';
import {
  CreateCouponResponseSchema,
  DeductOutcome,
  DeductResponseSchema,
  GetStockResponseSchema,
} from '../../src/gen/inventory/v1/inventory_pb.js';
import { DomainError, notFound } from '../../src/domain/errors.js';
import * as v from '../../src/domain/validate.js';
import type { InventoryHandlers } from '../../src/transport/handlers.js';
import type { BaselineOutcome, BaselineStore } from './store.js';

const OUTCOMES: Record<BaselineOutcome, DeductOutcome> = {
  deducted: DeductOutcome.DEDUCTED,
  sold_out: DeductOutcome.SOLD_OUT,
  insufficient: DeductOutcome.INSUFFICIENT,
};

const unimplemented = (what: string) => () => {
  throw new DomainError('unimplemented', `${what} is not part of this baseline`);
};

export function baselineHandlers(store: BaselineStore): InventoryHandlers {
  return {
    async deduct(req) {
      const quantity = req.quantity === 0n ? 1 : v.units('quantity', req.quantity, 1n, 1_000_000n);
      const r = await store.deduct({
        couponId: v.couponId(req.couponId),
        requestId: v.requestId(req.requestId),
        userId: req.userId,
        quantity,
      });
      return create(DeductResponseSchema, { outcome: OUTCOMES[r.outcome], remaining: BigInt(r.remaining) });
    },
    async createCoupon(req) {
      const id = v.couponId(req.couponId);
      const stock = v.units('total_stock', req.totalStock, 0n, v.MAX_TOTAL_STOCK);
      await store.create([{ id, stock }]);
      return create(CreateCouponResponseSchema, { created: true, coupon: { couponId: id, totalStock: BigInt(stock), shardCount: 1 } });
    },
    async getStock(req) {
      const [l] = await store.levels([v.couponId(req.couponId)]);
      if (!l) throw notFound(`coupon ${req.couponId} does not exist`);
      return create(GetStockResponseSchema, {
        level: {
          couponId: l.id,
          totalStock: BigInt(l.stock),
          available: BigInt(l.remaining),
          deducted: BigInt(l.stock - l.remaining),
          soldOut: l.remaining === 0,
        },
      });
    },
    restock: unimplemented('Restock'),
    compensate: unimplemented('Compensate'),
    reserve: unimplemented('Reserve'),
    confirm: unimplemented('Confirm'),
    release: unimplemented('Release'),
    extendHold: unimplemented('ExtendHold'),
    reserveOrder: unimplemented('ReserveOrder'),
    deductOrder: unimplemented('DeductOrder'),
    reconcile: unimplemented('Reconcile'),
    setSaleWindow: unimplemented('SetSaleWindow'),
    pauseSale: unimplemented('PauseSale'),
    resumeSale: unimplemented('ResumeSale'),
    getDeduction: unimplemented('GetDeduction'),
    listLedger: unimplemented('ListLedger'),
    listAnomalies: unimplemented('ListAnomalies'),
    // biome-ignore lint/correctness/useYield: a stream that refuses before its first message
    async *watchStock() {
      throw new DomainError('unimplemented', 'WatchStock is not part of this baseline');
    },
  };
}
