// shardstock reserve | confirm | release | extend as operators run them: bin/shardstock.mjs in a child process
// against a real in-process instance; every --json answer counts exactly and the exit codes say what happened.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { onlyJson, runCli, type CliRun } from './support/cli-run.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

const cli = (args: string[]) => runCli(t.grpcAddr, args);
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON, whose fields the assertions walk
const json = (r: CliRun) => onlyJson<Record<string, any>>(r);

describe('shardstock reserve / confirm / release / extend', () => {
  it('when a hold is made, extended, partly confirmed and another released, then every --json answer and exit code counts exactly', async () => {
    const id = uniqueId('clih');
    await t.client.createCoupon({ couponId: id, totalStock: 10n, shardCount: 2 });
    const r = await cli(['reserve', id, '--quantity', '4', '--request-id', 'h-1', '--ttl', '60000', '--json']);
    expect(r.code).toBe(0);
    const held = json(r);
    expect(held).toMatchObject({ couponId: id, requestId: 'h-1', outcome: 'held', replayed: false, hold: { quantity: 4, state: 'held' } });
    const holdId = held.hold.holdId as string;

    const ext = json(await cli(['extend', holdId, '--ttl', '120000', '--json']));
    expect(ext).toMatchObject({ outcome: 'extended', hold: { state: 'held' } });
    expect(Date.parse(ext.hold.expiresAt) - Date.parse(held.hold.expiresAt)).toBeGreaterThan(30_000);

    const c = await cli(['confirm', holdId, '--quantity', '3', '--json']);
    expect(c.code).toBe(0);
    expect(json(c)).toMatchObject({ outcome: 'confirmed', released: 1, hold: { state: 'confirmed', confirmed: 3 } });
    expect(json(await cli(['coupon', 'get', id, '--json']))).toMatchObject({ available: 7, deducted: 3, held: 0 });

    const other = json(await cli(['reserve', id, '--quantity', '2', '--json']));
    const rel = await cli(['release', other.hold.holdId, '--json']);
    expect([rel.code, json(rel).outcome, json(rel).released]).toEqual([0, 'released', 2]);
    // Too late: a released hold cannot be confirmed (exit 3, the outcome in the answer).
    const late = await cli(['confirm', other.hold.holdId, '--json']);
    expect([late.code, json(late).outcome]).toEqual([3, 'released']);
    // Plain text names the outcome and the hold.
    const plain = await cli(['reserve', id, '--quantity', '100']);
    expect([plain.code, plain.stdout.split('\n')[0]]).toEqual([3, 'INSUFFICIENT']);
  });
});
