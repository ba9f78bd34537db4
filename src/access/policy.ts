// Which role may call which RPC. `deduct` is what a checkout service needs; everything else is `admin`.
// The health Watch stream, server reflection and the live page's coupon list (ListCoupons) are open to both.
import type { Role } from './tokens.js';

const DEDUCT_ROLE_METHODS = new Set([
  'Deduct',
  'Compensate',
  'GetStock',
  'WatchStock',
  'Watch',
  'ServerReflectionInfo',
  'ListCoupons',
  // Holds and orders are a checkout's steps too.
  'Reserve',
  'Confirm',
  'Release',
  'ExtendHold',
  'ReserveOrder',
  'DeductOrder',
]);

export function mayCall(role: Role, method: string): boolean {
  return role === 'admin' || DEDUCT_ROLE_METHODS.has(method);
}
