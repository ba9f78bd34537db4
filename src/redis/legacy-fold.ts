// Upgrade step from the per-request layout (a key per request record, claim and user count) to the bucketed
// hashes (keys.ts): before an instance serves, every legacy key of its namespace is folded into its hash field
// (lua/legacy-fold-5.lua, atomic per key, so instances starting together fold each key once) and a marker
// is set so later starts skip the scan. Old instances must be stopped first: a record an old instance writes
// after the fold is not seen by the new ones (docs/operations.md "Upgrading the Redis layout").
import type { Cluster } from 'ioredis';
import { layoutMarkerKey } from './keys.js';
import { Scripts } from './scripts.js';

const LAYOUT = '2';

export interface FoldResult {
  /** false: the marker said it was done already. */
  scanned: boolean;
  folded: number;
}

export async function foldLegacyLayout(redis: Cluster, namespace: string, windowS: number, holdMs: number): Promise<FoldResult> {
  const marker = layoutMarkerKey(namespace);
  if ((await redis.get(marker)) === LAYOUT) return { scanned: false, folded: 0 };
  const scripts = new Scripts(redis, namespace, windowS);
  const legacy = new RegExp(`^${escapeRegExp(namespace)}:\\{([^}]+)\\}:(req|claim|user):(.+)$`);
  let folded = 0;
  for (const node of redis.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${namespace}:{*}:*`, 'COUNT', 1000);
      cursor = next;
      const found = keys.map((key) => legacy.exec(key)).filter((m) => m !== null);
      const done = await Promise.all(found.map((m) => scripts.legacyFold(m[1]!, m[2] as 'req' | 'claim' | 'user', m[3]!, holdMs)));
      folded += done.filter(Boolean).length;
    } while (cursor !== '0');
  }
  await redis.set(marker, LAYOUT);
  return { scanned: true, folded };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
