// biome-ignore-all lint/suspicious/noExplicitAny: a stand-in for MikroORM's entity manager that gates the transaction's first statement
// Two copies of one deduction (a republish after JetStream's 2-minute duplicate window while the first copy is
// still held, which lasts up to 5 minutes): copy A is refused while copy B's careful transaction has read the
// ledger and waits; a restock commits; B then takes the coupon lock and settles. B decided from a snapshot taken
// before A's refusal, so the deduction was both refused (Redis marks it: a Compensate gives nothing back) and
// settled in MySQL (found in review). B now reads the refusals again under the coupon lock, with a locking read,
// and starts over: the second copy is a repeat of the refusal. The interleaving is forced with a gate on B's
// transaction.
import { afterAll, expect, it } from 'vitest';
import { LedgerStore } from '../src/settlement/settle/ledger-store.js';
import type { SettlementEvent } from '../src/settlement/event.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { ledgerFigures } from './support/settlement.js';

const apps: TestApp[] = [];
afterAll(async () => {
  for (const a of apps.reverse()) await a.close().catch(() => {});
});

it('when a second copy of a deduction settles while the first is being refused, then it is a repeat of the refusal, never a sale', async () => {
  const w = await startTestApp({ SHARDSTOCK_INSTANCE_ID: 'srr-1' });
  apps.push(w);
  const id = uniqueId();
  await w.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 1 });
  await w.app.orm.em.fork().execute('update coupon set settled_remaining = 0 where id = ?', [id]);
  const orm = w.app.orm;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let readDone!: () => void;
  const reached = new Promise<void>((r) => (readDone = r));
  const proxyOrm: any = {
    em: {
      fork() {
        const f: any = orm.em.fork();
        const t = f.transactional.bind(f);
        f.transactional = (cb: any) =>
          t((em: any) => {
            let n = 0;
            const p = new Proxy(em, {
              get(target, prop) {
                const v = Reflect.get(target, prop, target);
                if (prop === 'execute')
                  return async (...args: any[]) => {
                    const r = await v.apply(target, args);
                    if (n++ === 0) {
                      readDone();
                      await gate;
                    }
                    return r;
                  };
                return typeof v === 'function' ? v.bind(target) : v;
              },
            });
            return cb(p);
          });
        return f;
      },
    },
  };
  const storeB = new LedgerStore(proxyOrm);
  const e: SettlementEvent = {
    kind: 'D',
    couponId: id,
    requestId: 'r1',
    userId: 'u1',
    quantity: 1,
    shard: 0,
    occurredAt: Date.now(),
    reason: '',
  };
  const copyB = storeB.applyBatch(id, [{ event: e, ref: 'B' }]);
  await reached;
  const a = await w.app.settlement.ledger.applyBatch(id, [{ event: e, ref: 'A' }], true);
  expect({ refused: a.refused.length, applied: a.plan.apply.length }).toEqual({ refused: 1, applied: 0 });
  await w.app.repo.restock(id, 'rs-1', 5, Number.MAX_SAFE_INTEGER);
  release();
  const b = await copyB;
  expect({ applied: b.plan.apply.length, refusedAgain: b.refusedAgain.length }).toEqual({ applied: 0, refusedAgain: 1 });
  const f = await ledgerFigures(w.app, id);
  expect({ deductRows: f.deductRows, refusals: f.anomalies.length, remaining: f.remaining }).toEqual({
    deductRows: 0,
    refusals: 1,
    remaining: 5,
  });
});
