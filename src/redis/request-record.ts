// One request's record on its shard, as the scripts pack it into a field of the shard's record hashes
// (lua/includes/buckets.lua: "q|r|t|flags|u"; deduct-7.lua writes it, compensate-6.lua adds flag c,
// refuse-mark-3.lua flag x), and the audit API's read of it. A plain read: it writes nothing.
import type { Cluster } from 'ioredis';
import type { RequestRecordView } from '../audit/audit-service.js';
import type { ShardRef } from '../domain/ports.js';
import { Scripts } from './scripts.js';

export interface RequestRecord {
  userId: string;
  quantity: number;
  /** The shard's avail right after the deduction (0 for a record a recovery put back). */
  remaining: number;
  /** ms; null when unknown */
  deductedAt: number | null;
  compensated: boolean;
  refused: boolean;
  /** A confirmed Reserve's (flag h): a deduction, but its request id is a Reserve's. */
  reserve: boolean;
  /** An unconfirmed hold's value (open, released or expired): no deduction at all; `reserve` is set too. */
  hold?: boolean;
}

/** A hold's value where a record was looked for ("h<state>|units|expires|limited|rb|remaining|t|user",
 * lua/includes/hold-record.lua): read so that a Deduct reusing the id is told it is a Reserve's. */
export function unpackHoldValue(packed: string): RequestRecord {
  const [, units, , , , remaining, , ...user] = packed.split('|');
  return {
    quantity: Number(units),
    remaining: Number(remaining),
    deductedAt: null,
    compensated: false,
    refused: false,
    reserve: true,
    hold: true,
    userId: user.join('|'),
  };
}

export function unpackRecord(packed: string): RequestRecord {
  const parts = packed.split('|');
  const flags = parts[3] ?? '';
  return {
    quantity: Number(parts[0]),
    remaining: Number(parts[1]),
    deductedAt: parts[2] ? Number(parts[2]) : null,
    compensated: flags.includes('c'),
    refused: flags.includes('x'),
    reserve: flags.includes('h'),
    // The user id is last and may be empty; ids never contain '|'.
    userId: parts.slice(4).join('|'),
  };
}

export class RedisRequestRecords {
  private readonly scripts: Scripts;

  constructor(redis: Cluster, namespace: string, windowS: number) {
    this.scripts = new Scripts(redis, namespace, windowS);
  }

  async read(shard: ShardRef, requestId: string): Promise<RequestRecordView | null> {
    const rec = await this.scripts.recordRead(shard, requestId);
    // A shard that lost its data has no records to show until its recovery restores them from the ledger.
    if (rec === null || rec === 'missing' || rec.hold) return null;
    return {
      shard: shard.index,
      userId: rec.userId,
      quantity: rec.quantity,
      remaining: rec.remaining,
      compensated: rec.compensated,
      refused: rec.refused,
      deductedAt: rec.deductedAt,
    };
  }

  /** The "user|quantity" claim of a request of a limited coupon (which user's shard holds its record). */
  async readClaim(shard: ShardRef, requestId: string): Promise<string | null> {
    const claim = await this.scripts.claimRead(shard, requestId);
    return claim === 'missing' ? null : claim;
  }
}
