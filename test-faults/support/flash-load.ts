// A flash-sale client for fault tests: every request id is retried (same request_id) until it gets a
// definitive outcome, as a well-behaved client would, and every attempt is recorded: which ids were answered
// DEDUCTED (first time or as a replay), which status codes the failed attempts got, and when.
import type { ServiceError } from '@grpc/grpc-js';
import type { InventoryClient } from '../../src/client/grpc-client.js';
import { DeductOutcome } from '../../src/gen/inventory/v1/inventory_pb.js';

export interface FlashLoadOptions {
  /** Attempts go to these in turn (several instances behind a balancer, or several channels to one). */
  clients: () => InventoryClient[];
  couponId: string;
  requestIds: string[];
  concurrency: number;
  /** Per-attempt deadline. */
  deadlineMs?: number;
  /** Stop retrying at this time (ms since epoch); ids still in doubt are reported unresolved. */
  giveUpAt: number;
  /** Called after each id is resolved with the number resolved so far. */
  onResolved?: (resolved: number) => void;
  /** Several callers send the same id at once (a retry storm). Default 1. */
  callersPerId?: number;
}

export interface Attempt {
  at: number;
  requestId: string;
  /** 0 = OK */
  code: number;
  outcome?: DeductOutcome;
  replayed?: boolean;
  shard?: number;
  message?: string;
  /** The `retry-after-ms` a refusal carried. */
  retryAfterMs?: number;
}

export interface FlashLoadResult {
  deducted: Set<string>;
  /** Ids answered DEDUCTED with replayed=false, counted per id (more than one would be a double deduction). */
  firstDeductions: Map<string, number>;
  refused: Map<string, DeductOutcome>;
  unresolved: string[];
  attempts: Attempt[];
  /** Failed attempts by gRPC status code. */
  errorCodes: Map<number, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function flashLoad(o: FlashLoadOptions): Promise<FlashLoadResult> {
  const r: FlashLoadResult = {
    deducted: new Set(),
    firstDeductions: new Map(),
    refused: new Map(),
    unresolved: [],
    attempts: [],
    errorCodes: new Map(),
  };
  const queue = o.requestIds.flatMap((id) => Array.from({ length: o.callersPerId ?? 1 }, () => id));
  let next = 0;
  let turn = 0;
  const resolvedIds = new Set<string>();

  async function resolve(requestId: string): Promise<void> {
    while (Date.now() < o.giveUpAt) {
      const clients = o.clients();
      const client = clients[turn++ % clients.length]!;
      try {
        const res = await client.deduct({ couponId: o.couponId, requestId, quantity: 1n }, { deadlineMs: o.deadlineMs ?? 8000 });
        r.attempts.push({ at: Date.now(), requestId, code: 0, outcome: res.outcome, replayed: res.replayed, shard: res.shard });
        if (res.outcome === DeductOutcome.DEDUCTED) {
          r.deducted.add(requestId);
          if (!res.replayed) r.firstDeductions.set(requestId, (r.firstDeductions.get(requestId) ?? 0) + 1);
        } else {
          r.refused.set(requestId, res.outcome);
        }
        return;
      } catch (err) {
        const e = err as ServiceError;
        const hinted = Number(e.metadata?.get('retry-after-ms')[0] ?? NaN);
        r.attempts.push({
          at: Date.now(),
          requestId,
          code: e.code,
          message: e.details,
          ...(Number.isFinite(hinted) ? { retryAfterMs: hinted } : {}),
        });
        r.errorCodes.set(e.code, (r.errorCodes.get(e.code) ?? 0) + 1);
        await sleep(Number.isFinite(hinted) ? hinted : 50 + Math.random() * 100);
      }
    }
    r.unresolved.push(requestId);
  }

  async function worker(): Promise<void> {
    while (next < queue.length) {
      const id = queue[next++]!;
      await resolve(id);
      if (!resolvedIds.has(id)) {
        resolvedIds.add(id);
        o.onResolved?.(resolvedIds.size);
      }
    }
  }
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  // An id refused once and deducted by a concurrent caller of the storm counts as deducted.
  for (const id of r.deducted) r.refused.delete(id);
  return r;
}
