// A shard's `moves` hash (keys.ts), parsed here only: moveId -> "target|quantity|startedMs", as move-out-2.lua
// writes it.
import type { PendingMove } from '../domain/ports.js';

export function parsePendingMoves(hash: Record<string, string>): PendingMove[] {
  return Object.entries(hash).map(([moveId, v]) => {
    const [target, quantity, startedMs] = v.split('|');
    return { moveId, target: Number(target), quantity: Number(quantity), startedMs: Number(startedMs) };
  });
}
