// The no-op ceiling: Deduct decrements a number in memory and answers. What is left is the cost of the RPC
// layer (grpc-js, protobuf-es, the shared handlers) — the most any design on this stack can reach.
import type { BaselineStore } from './store.js';

export function noopStore(): BaselineStore {
  const coupons = new Map<string, { stock: number; remaining: number }>();
  return {
    async deduct({ couponId, quantity }) {
      const c = coupons.get(couponId);
      if (!c || c.remaining === 0) return { outcome: 'sold_out', remaining: 0 };
      if (c.remaining < quantity) return { outcome: 'insufficient', remaining: c.remaining };
      c.remaining -= quantity;
      return { outcome: 'deducted', remaining: c.remaining };
    },
    async create(list) {
      for (const { id, stock } of list) coupons.set(id, { stock, remaining: stock });
    },
    async levels(ids) {
      return ids.map((id) => ({ id, stock: coupons.get(id)?.stock ?? 0, remaining: coupons.get(id)?.remaining ?? 0 }));
    },
    async close() {},
  };
}
