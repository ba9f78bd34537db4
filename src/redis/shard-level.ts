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
    inTransit: Number(transit ?? 0),
    net: Number(net ?? 0),
    held: Number(held ?? 0),
  };
}
