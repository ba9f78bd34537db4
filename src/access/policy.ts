// Which role may call which RPC. `deduct` is what a checkout service needs; everything else is `admin`.
import type { Role } from './tokens.js';

const DEDUCT_ROLE_METHODS = new Set(['Deduct', 'Compensate', 'GetStock', 'WatchStock']);

export function mayCall(role: Role, method: string): boolean {
  return role === 'admin' || DEDUCT_ROLE_METHODS.has(method);
}
