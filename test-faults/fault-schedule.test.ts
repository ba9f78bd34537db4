// A randomized fault schedule (#11): Deducts (quantities 1–3, short deadlines, retries with the same id),
// holds (Reserve; then Confirm whole or in part, Release, or left to expire), DeductOrders of two coupons
// (some later compensated whole), Compensates and Restocks over three instances (two in-process, one an OS
// process), interleaved with shard loss (a master flushed, as a restart without persistence does), a master
// SIGKILLed and promoted, and the OS-process instance SIGKILLed and started again. Each schedule prints its
// seed: FAULT_SEED=<seed> replays it, FAULT_SCHEDULES=<n> runs more (CI runs 2).
//
// At the end (every in-doubt id retried to a definitive answer, every open hold released, settlement caught up,
// one repair):
//   per coupon, units sold (Deducts, confirmed holds, order items) − units compensated ≤ stock + restocks, the
//   ledger holds exactly the clients' DEDUCTED, CONFIRMED and COMPENSATED answers, nothing is left held, no
//   anomaly, and Reconcile is consistent.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import slotOf from 'cluster-key-slot';
import { createInventoryClient, type InventoryClient } from '../src/client/grpc-client.js';
import { orderItemRequestId } from '../src/domain/ids.js';
import { allShards } from '../src/domain/routing.js';
import {
  CompensateOutcome,
  ConfirmOutcome,
  DeductOutcome,
  OrderOutcome,
  HoldState,
  ReleaseOutcome,
  ReserveOutcome,
} from '../src/gen/inventory/v1/inventory_pb.js';
import { startTestApp, TEST_DB_URL, uniqueId, type TestApp } from '../test/support/harness.js';
import { freePort } from '../test/support/ports.js';
import { spawnTs } from '../test/support/processes.js';
import { waitFor } from '../test/support/settlement.js';
import { cli, OwnCluster } from './support/own-cluster.js';

const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 1e9));
const SCHEDULES = Number(process.env.FAULT_SCHEDULES ?? 2);
const STEPS = Number(process.env.FAULT_STEPS ?? 30);

let cluster: OwnCluster;
let a: TestApp;
let b: TestApp;
const children: ChildProcess[] = [];
const extraClients: InventoryClient[] = [];
beforeAll(async () => {
  cluster = await OwnCluster.start(7101);
  const env = {
    SHARDSTOCK_REDIS_NODES: cluster.seeds,
    SHARDSTOCK_WORKERS: 'relay,settle,sweep',
    SHARDSTOCK_SWEEP_INTERVAL_MS: '250',
    SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '1000',
  };
  a = await startTestApp(env);
  b = await startTestApp({ ...env, SHARDSTOCK_NAMESPACE: a.namespace });
});
afterAll(async () => {
  for (const c of extraClients) c.close();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await b?.close();
  await a?.close();
  cluster?.stop();
});

/** mulberry32: a small seeded generator, so a printed seed replays the same schedule. */
function rng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: T[]) => xs[Math.floor(next() * xs.length)]!,
  };
}

async function spawnInstance(name: string): Promise<{ proc: ChildProcess; client: InventoryClient }> {
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const proc = spawnTs('src/main.ts', [], {
    SHARDSTOCK_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
    SHARDSTOCK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
    SHARDSTOCK_MYSQL_URL: TEST_DB_URL,
    SHARDSTOCK_REDIS_NODES: cluster.seeds,
    SHARDSTOCK_NAMESPACE: a.namespace,
    SHARDSTOCK_INSTANCE_ID: name,
    SHARDSTOCK_WORKERS: 'relay,settle,sweep',
    SHARDSTOCK_SWEEP_INTERVAL_MS: '250',
    SHARDSTOCK_RELAY_CLAIM_IDLE_MS: '1000',
    SHARDSTOCK_LOG_LEVEL: 'error',
  });
  children.push(proc);
  const client = createInventoryClient(`127.0.0.1:${grpcPort}`);
  extraClients.push(client);
  await waitFor(
    `instance ${name} to serve`,
    () =>
      client.getStock({ couponId: 'probe' }, { deadlineMs: 1000 }).then(
        () => 0,
        (e: { code: number }) => e.code,
      ),
    (code) => code === status.NOT_FOUND,
    30_000,
  );
  return { proc, client };
}

const RETRYABLE = new Set([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.ABORTED, status.CANCELLED, status.INTERNAL]);
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

describe('randomized fault schedule', () => {
  for (let n = 0; n < SCHEDULES; n++) {
    const seed = SEED + n;
    it(`when Deduct/hold/order/Compensate/Restock interleave with shard loss, a master kill and an instance kill (seed ${seed}), then nothing is oversold and the books agree`, async () => {
      console.log(`fault schedule seed ${seed} (replay: FAULT_SEED=${seed} FAULT_SCHEDULES=1)`);
      const r = rng(seed);
      let c = await spawnInstance(`sched-${seed}-0`);
      const clients = () => [a.client, b.client, c.client];
      const couponId = uniqueId('sched');
      const stock = 300;
      await a.client.createCoupon({ couponId, totalStock: BigInt(stock), shardCount: 8 });
      const coupon = (await a.app.repo.find(couponId))!;
      // The second item of every order: its own books, checked as the first coupon's are.
      const otherId = uniqueId('sched-o');
      const otherStock = 25;
      await a.client.createCoupon({ couponId: otherId, totalStock: BigInt(otherStock), shardCount: 4 });
      const otherDeducted = new Map<string, number>();
      const orderItems = new Map<string, [number, number]>();
      const orderInDoubt = new Set<string>();
      const otherCompensated = new Map<string, number>();
      /** Orders answered DEDUCTED, and those of them compensated as a whole. */
      const ordersDeducted = new Set<string>();
      const ordersCompensated = new Set<string>();
      /** Each order's latest definitive answer. */
      const orderOutcome = new Map<string, OrderOutcome>();

      const deducted = new Map<string, number>();
      const quantityOf = new Map<string, number>();
      const compensated = new Map<string, number>();
      const inDoubt = new Set<string>();
      // Every answer each id got, in order, with the step it came in: printed for any id the books disagree on.
      const history = new Map<string, string[]>();
      const note = (id: string, what: string) => {
        const h = history.get(id) ?? [];
        h.push(`${log.length}:${what}`);
        history.set(id, h);
      };
      // Holds: the TTL of each Reserve, the hold id of each that answered HELD and is not ended yet, Reserves
      // without a definitive answer, and Confirms without one (request id -> units to keep, 0 = all).
      const ttlOf = new Map<string, number>();
      const openHolds = new Map<string, string>();
      const reserveInDoubt = new Set<string>();
      const confirmInDoubt = new Map<string, number>();
      // How holds and orders were answered, by call and outcome (printed: what the schedule exercised).
      const holdAnswers = new Map<string, number>();
      const count = (what: string) => holdAnswers.set(what, (holdAnswers.get(what) ?? 0) + 1);
      let restocked = 0;
      let seq = 0;
      let masterKilled = false;
      const log: string[] = [];

      /** A call that failed: noted; a retryable failure leaves `id` in doubt (in `inDoubtOf`), any other fails the test. */
      const failed = (id: string, what: string, inDoubtOf: Set<string>, err: unknown) => {
        const code = (err as { code?: number }).code ?? -1;
        note(id, `${what}${status[code] ?? code} ${String((err as Error).message).slice(0, 80)}`);
        if (!RETRYABLE.has(code)) throw err;
        inDoubtOf.add(id);
      };

      const tryDeduct = async (requestId: string, deadlineMs: number) => {
        try {
          const res = await r.pick(clients()).deduct({ couponId, requestId, quantity: BigInt(quantityOf.get(requestId)!) }, { deadlineMs });
          inDoubt.delete(requestId);
          note(requestId, `${DeductOutcome[res.outcome]}${res.replayed ? ' (replayed)' : ''}`);
          if (res.outcome === DeductOutcome.DEDUCTED) deducted.set(requestId, quantityOf.get(requestId)!);
        } catch (err) {
          failed(requestId, '', inDoubt, err);
        }
      };

      const tryReserve = async (requestId: string, deadlineMs: number) => {
        try {
          const res = await r
            .pick(clients())
            .reserve({ couponId, requestId, quantity: BigInt(quantityOf.get(requestId)!), ttlMs: ttlOf.get(requestId)! }, { deadlineMs });
          reserveInDoubt.delete(requestId);
          count(`reserve ${ReserveOutcome[res.outcome]}`);
          note(requestId, `reserve ${ReserveOutcome[res.outcome]}${res.replayed ? ' (replayed)' : ''} ${HoldState[res.hold?.state ?? 0]}`);
          if (res.outcome === ReserveOutcome.HELD && res.hold?.state === HoldState.HELD) openHolds.set(requestId, res.hold.holdId);
        } catch (err) {
          failed(requestId, 'reserve ', reserveInDoubt, err);
        }
      };

      const tryOrder = async (orderId: string, deadlineMs: number) => {
        const [q0, q1] = orderItems.get(orderId)!;
        try {
          const res = await r.pick(clients()).deductOrder(
            {
              requestId: orderId,
              items: [
                { couponId, quantity: BigInt(q0) },
                { couponId: otherId, quantity: BigInt(q1) },
              ],
              ttlMs: 20_000,
            },
            { deadlineMs },
          );
          orderInDoubt.delete(orderId);
          orderOutcome.set(orderId, res.outcome);
          note(orderId, `order ${OrderOutcome[res.outcome]}${res.replayed ? ' (replayed)' : ''}`);
          count(`order ${OrderOutcome[res.outcome]}`);
          if (res.outcome === OrderOutcome.DEDUCTED) {
            // Each item is a deduction under its own request id (the ledger's), on its own coupon.
            deducted.set(orderItemRequestId(orderId, 0), q0);
            otherDeducted.set(orderItemRequestId(orderId, 1), q1);
            ordersDeducted.add(orderId);
          }
        } catch (err) {
          failed(orderId, 'order ', orderInDoubt, err);
        }
      };

      /** Compensate of one deduction, retried until answered (undefined: never answered). */
      const compensateOne = async (cid: string, requestId: string): Promise<CompensateOutcome | undefined> => {
        for (let i = 0; i < 30; i++) {
          try {
            const res = await r.pick(clients()).compensate({ couponId: cid, requestId, reason: 'schedule' });
            note(requestId, `compensate ${CompensateOutcome[res.outcome]}`);
            return res.outcome;
          } catch (err) {
            if (!RETRYABLE.has((err as { code?: number }).code ?? -1)) throw err;
            await sleep(100);
          }
        }
        return undefined;
      };
      const givenBack = (o: CompensateOutcome | undefined) =>
        o === CompensateOutcome.COMPENSATED || o === CompensateOutcome.ALREADY_COMPENSATED;

      /** Compensate of a whole order (every item, on both coupons), retried until answered. */
      const compensateOrder = async (orderId: string) => {
        const [q0, q1] = orderItems.get(orderId)!;
        const items = [
          [couponId, orderItemRequestId(orderId, 0), q0, compensated],
          [otherId, orderItemRequestId(orderId, 1), q1, otherCompensated],
        ] as const;
        for (let i = 0; i < 30; i++) {
          try {
            const res = await r.pick(clients()).compensate({ orderId, reason: 'schedule' });
            note(orderId, `compensate order ${CompensateOutcome[res.outcome]}`);
            count(`compensate order ${CompensateOutcome[res.outcome]}`);
            if (res.outcome === CompensateOutcome.NOT_FOUND) {
              // The order's record was lost with a flushed master (docs/orders.md): a retry of its DeductOrder
              // brings it back, and must find it deducted, taking nothing twice; then it is compensated.
              orderInDoubt.add(orderId);
              while (orderInDoubt.has(orderId)) await tryOrder(orderId, 10_000);
              expect(orderOutcome.get(orderId), orderId).toBe(OrderOutcome.DEDUCTED);
              count('order restored by a retry');
              continue;
            }
            if (givenBack(res.outcome)) for (const [, rid, q, given] of items) given.set(rid, q);
            ordersCompensated.add(orderId);
            return;
          } catch (err) {
            const code = (err as { code?: number }).code ?? -1;
            note(orderId, `compensate order ${status[code] ?? code}`);
            if (code === status.FAILED_PRECONDITION) {
              // An item's deduction was not found (its record lost with a flushed master) and the others were
              // given back: each item asked on its own says which.
              count('compensate order FAILED_PRECONDITION');
              for (const [cid, rid, q, given] of items) if (givenBack(await compensateOne(cid, rid))) given.set(rid, q);
              ordersCompensated.add(orderId);
              return;
            }
            if (!RETRYABLE.has(code)) throw err;
            await sleep(100);
          }
        }
      };

      /** Confirm (keep units, 0 = all) or Release an open hold, retried with the same hold id until answered. */
      const endHold = async (requestId: string, how: { keep: number } | 'release', tries = 30) => {
        const holdId = openHolds.get(requestId)!;
        for (let i = 0; i < tries; i++) {
          try {
            if (how === 'release') {
              const res = await r.pick(clients()).release({ target: { case: 'holdId', value: holdId }, reason: 'schedule' });
              note(requestId, `release ${ReleaseOutcome[res.outcome]}`);
              count(`release ${ReleaseOutcome[res.outcome]}`);
              // Only a Confirm this test sent can have confirmed it.
              expect(res.outcome, requestId).not.toBe(ReleaseOutcome.CONFIRMED);
            } else {
              const res = await r.pick(clients()).confirm({ target: { case: 'holdId', value: holdId }, quantity: BigInt(how.keep) });
              note(requestId, `confirm ${ConfirmOutcome[res.outcome]}${res.replayed ? ' (replayed)' : ''}`);
              count(`confirm ${ConfirmOutcome[res.outcome]}`);
              if (res.outcome === ConfirmOutcome.CONFIRMED) deducted.set(requestId, Number(res.hold!.confirmed));
              confirmInDoubt.delete(requestId);
            }
            openHolds.delete(requestId);
            return;
          } catch (err) {
            const code = (err as { code?: number }).code ?? -1;
            note(requestId, `${how === 'release' ? 'release' : 'confirm'} ${status[code] ?? code}`);
            if (!RETRYABLE.has(code)) throw err;
            await sleep(100);
          }
        }
        // Still unanswered: a Confirm may have run, so it is asked again at the end, never released.
        if (how !== 'release') confirmInDoubt.set(requestId, how.keep);
      };

      for (let step = 0; step < STEPS; step++) {
        const x = r.next();
        if (x < 0.45) {
          const ids = Array.from({ length: r.int(5, 25) }, () => `d${seed}-${seq++}`);
          for (const id of ids) quantityOf.set(id, r.int(1, 3));
          // Some ids are sent twice at once, and some earlier in-doubt ids are retried alongside.
          const retries = [...inDoubt].slice(0, 5);
          const batch = [...ids, ...ids.filter(() => r.next() < 0.2), ...retries];
          await Promise.all(batch.map((id) => tryDeduct(id, r.pick([80, 300, 2000]))));
          log.push(`deduct ${batch.length}`);
        } else if (x < 0.6) {
          // New holds, some short enough to expire during the schedule; and some open ones ended.
          const ids = Array.from({ length: r.int(2, 8) }, () => `h${seed}-${seq++}`);
          for (const id of ids) {
            quantityOf.set(id, r.int(1, 3));
            ttlOf.set(id, r.pick([1500, 60_000]));
          }
          const retries = [...reserveInDoubt].slice(0, 3);
          await Promise.all([...ids, ...ids.filter(() => r.next() < 0.2), ...retries].map((id) => tryReserve(id, r.pick([80, 300, 2000]))));
          // Not one whose Confirm is in doubt: only that Confirm, asked again, may end it.
          const ending = [...openHolds.keys()].filter((id) => !confirmInDoubt.has(id) && r.next() < 0.6);
          await Promise.all(
            ending.map((id) => {
              const y = r.next();
              if (y < 0.45) return endHold(id, { keep: 0 });
              if (y < 0.65) return endHold(id, { keep: r.int(1, quantityOf.get(id)!) });
              return endHold(id, 'release');
            }),
          );
          log.push(`hold ${ids.length}, end ${ending.length}`);
        } else if (x < 0.67) {
          const ids = Array.from({ length: r.int(2, 5) }, () => `o${seed}-${seq++}`);
          for (const id of ids) orderItems.set(id, [r.int(1, 3), r.int(1, 2)]);
          const retries = [...orderInDoubt].slice(0, 2);
          await Promise.all([...ids, ...ids.filter(() => r.next() < 0.2), ...retries].map((id) => tryOrder(id, r.pick([300, 2000, 5000]))));
          // Now and then an earlier order is given back whole.
          const placed = [...ordersDeducted].filter((id) => !ordersCompensated.has(id));
          if (placed.length > 0 && r.next() < 0.5) {
            const id = r.pick(placed);
            await compensateOrder(id);
            log.push(`order ${ids.length}, compensate ${id}`);
          } else log.push(`order ${ids.length}`);
        } else if (x < 0.74) {
          const candidates = [...deducted.keys()].filter((id) => !compensated.has(id));
          if (candidates.length === 0) continue;
          const id = r.pick(candidates);
          if (givenBack(await compensateOne(couponId, id))) compensated.set(id, deducted.get(id)!);
          log.push(`compensate ${id}`);
        } else if (x < 0.81) {
          const q = r.int(5, 30);
          const rid = `restock-${seed}-${seq++}`;
          for (let i = 0; ; i++) {
            try {
              await r.pick([a.client, b.client]).restock({ couponId, requestId: rid, quantity: BigInt(q) });
              break;
            } catch (err) {
              if (!RETRYABLE.has((err as { code?: number }).code ?? -1) || i > 30) throw err;
              await new Promise((res) => setTimeout(res, 200));
            }
          }
          restocked += q;
          log.push(`restock ${q}`);
        } else if (x < 0.9) {
          // A master restarts without persistence. (After the relay drained its outbox: events still in a
          // lost outbox are acknowledged deductions lost with Redis, which no recovery can bring back.)
          for (const id of [couponId, otherId])
            await waitFor(
              'the outboxes to drain',
              () => a.client.reconcile({ couponId: id }),
              (rec) => rec.outboxEvents === 0n,
              30_000,
            );
          const masters = (await cluster.nodes()).filter((m) => m.role === 'master');
          const m = r.pick(masters);
          await cli(m.port, 'flushall');
          log.push(`flush ${m.port}`);
        } else if (x < 0.95 && !masterKilled) {
          masterKilled = true;
          const slot = slotOf(a.app.store.keys(r.pick(allShards(coupon))).shard);
          const victim = await cluster.masterOfSlot(slot);
          await cluster.kill(victim.port);
          await cluster.waitPromotion(slot, victim.port);
          await cluster.restart(victim.port);
          log.push(`kill master ${victim.port}`);
        } else {
          c.proc.kill('SIGKILL');
          c = await spawnInstance(`sched-${seed}-${seq++}`);
          log.push('kill instance');
        }
      }

      /** Asks every member of `left` again (each answer takes it out) until none is left. */
      const settle = <K, V>(what: string, left: Set<K> | Map<K, V>, ask: (entry: K) => Promise<unknown>) =>
        waitFor(
          what,
          async () => {
            await Promise.all([...left.keys()].map(ask));
            return left.size;
          },
          (n) => n === 0,
          60_000,
        );
      // Every in-doubt id is retried with its own request id until it has a definitive answer. Then every hold:
      // in-doubt Reserves answered, in-doubt Confirms answered, and every hold still open released, so that
      // nothing is held when the books are compared.
      await settle('every in-doubt id to be answered', inDoubt, (id) => tryDeduct(id, 5000));
      await settle('every in-doubt Reserve to be answered', reserveInDoubt, (id) => tryReserve(id, 5000));
      await settle('every in-doubt Confirm to be answered', confirmInDoubt, (id) => endHold(id, { keep: confirmInDoubt.get(id)! }, 3));
      await settle('every in-doubt order to be answered', orderInDoubt, (id) => tryOrder(id, 10_000));
      await settle('every open hold to be released', openHolds, (id) => endHold(id, 'release', 3));
      /** One coupon's books against what its callers were told; its Reconcile once settled. */
      const checkBooks = async (id: string, sold: Map<string, number>, given: Map<string, number>, limit: number) => {
        const settledRec = await waitFor(
          `settlement of ${id} to catch up and every hold to be ended`,
          () => a.client.reconcile({ couponId: id }),
          (rec) => rec.outboxEvents === 0n && rec.jetstreamPending === 0n && rec.inFlightNet === 0n && rec.redisHeld === 0n,
          90_000,
        );
        const units = (m: Map<string, number>) => [...m.values()].reduce((t, q) => t + q, 0);
        expect(units(sold) - units(given), id).toBeLessThanOrEqual(limit);
        const rows = await a.app.orm.em
          .fork()
          .execute<{ request_id: string; kind: string; quantity: number }[]>(
            "select request_id, kind, quantity from stock_ledger where coupon_id = ? and kind in ('DEDUCT', 'COMPENSATE')",
            [id],
          );
        const ledgerDeducted = new Map(rows.filter((x) => x.kind === 'DEDUCT').map((x) => [x.request_id, Number(x.quantity)]));
        const ledgerCompensated = new Set(rows.filter((x) => x.kind === 'COMPENSATE').map((x) => x.request_id));
        const disputed = [...new Set([...ledgerDeducted.keys(), ...sold.keys()])].filter(
          (rid) => ledgerDeducted.get(rid) !== sold.get(rid),
        );
        if (disputed.length > 0)
          console.log(
            JSON.stringify({
              disputed: disputed.map((rid) => [rid, ledgerDeducted.get(rid), history.get(rid) ?? history.get(rid.replace(/:\d+$/, ''))]),
            }),
          );
        expect([...ledgerDeducted].sort(), id).toEqual([...sold].sort());
        expect([...ledgerCompensated].sort(), id).toEqual([...given.keys()].sort());
        expect(settledRec.anomalies, id).toBe(0n);
        const repaired = await a.client.reconcile({ couponId: id, repair: true });
        expect(repaired.consistent, id).toBe(true);
        return { sold: units(sold), given: units(given) };
      };
      const first = await checkBooks(couponId, deducted, compensated, stock + restocked);
      const other = await checkBooks(otherId, otherDeducted, otherCompensated, otherStock);
      console.log(JSON.stringify({ seed, steps: log, ...first, restocked, other, answers: Object.fromEntries(holdAnswers) }));
    });
  }
});
