// The shard hash's level fields (keys.ts: avail, transit, net), read with one HMGET and parsed here only.
import type { ShardLevel } from '../domain/ports.js';

/** The fields to HMGET, in the order parseShardLevel reads them. */
export const SHARD_LEVEL_FIELDS = ['avail', 'transit', 'net', 'held'] as const;

/** available is null when the shard hash is missing (lost or never created). */
export function parseShardLevel(index: number, values: readonly (string | null | undefined)[]): ShardLevel {
  const [avail, transit, net, held] = values;
  return {
    index,
    available: avail === null || avail === undefined ? null : Number(avail),
    inTransit: transitUnits(transit),
    net: Number(net ?? 0),
    held: Number(held ?? 0),
  };
}

/** A shard's `transit` (units moved out, not yet acknowledged) as units. Below zero it counts nothing: an
 * acknowledgement applied for units the shard no longer counted (which the recovery's order of writes rules
 * out) must not cancel real units elsewhere in a sum, which would hide a surplus from Reconcile, from the
 * recovery's plan and from the sold-out check. */
export function transitUnits(raw: string | number | null | undefined): number {
  return Math.max(0, Number(raw ?? 0));
}
