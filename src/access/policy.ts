// Which role may call which RPC. `deduct` is what a checkout service needs; everything else is `admin`.
// The health Watch stream, server reflection and the live page's coupon list (ListCoupons) are open to both.
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import type { Role } from './tokens.js';

const M = InventoryService.method;
const DEDUCT_ROLE_METHODS = new Set([
  M.deduct.name,
  M.compensate.name,
  M.getStock.name,
  M.watchStock.name,
  'Watch',
  'ServerReflectionInfo',
  'ListCoupons',
]);

export function mayCall(role: Role, method: string): boolean {
  return role === 'admin' || DEDUCT_ROLE_METHODS.has(method);
}
