// `shardstock order` as operators run it: bin/shardstock.mjs in a child process against a real in-process
// instance: a deducted order, a refused one naming its item, reserve -> confirm and reserve -> release, --json.
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

interface Answer {
  outcome: string;
  expiresAt?: string;
  items: { state: string | null }[];
}

const cli = (args: string[]) => runCli(t.grpcAddr, args);
const json = (r: CliRun) => onlyJson<Answer>(r);

describe('shardstock order', () => {
  it('when orders are placed, confirmed and released from the CLI, then --json says what each item did and the exit code follows the outcome', async () => {
    const [a, b] = [uniqueId('cla'), uniqueId('clb')];
    await Promise.all([
      t.client.createCoupon({ couponId: a, totalStock: 10n, shardCount: 2 }),
      t.client.createCoupon({ couponId: b, totalStock: 2n, shardCount: 2 }),
    ]);
    const d = await cli(['order', `${a}=2`, b, '--request-id', 'cli-o1', '--json']);
    expect(d.code).toBe(0);
    expect(json(d)).toMatchObject({
      orderId: 'cli-o1',
      outcome: 'deducted',
      replayed: false,
      refusal: null,
      items: [
        { index: 0, couponId: a, quantity: 2, state: 'confirmed', requestId: 'cli-o1:0' },
        { index: 1, couponId: b, quantity: 1, state: 'confirmed', requestId: 'cli-o1:1' },
      ],
    });
    const refused = await cli(['order', a, `${b}=5`, '--json']);
    expect(refused.code).toBe(3);
    expect(json(refused)).toMatchObject({ outcome: 'refused', refusal: { index: 1, couponId: b, reason: 'insufficient' } });

    const held = await cli(['order', a, b, '--reserve', '--ttl', '60000', '--request-id', 'cli-o2', '--json']);
    expect(json(held)).toMatchObject({ outcome: 'reserved', items: [{ state: 'held' }, { state: 'held' }] });
    expect(json(held).expiresAt).toMatch(/^20\d\d-/);
    const confirmed = await cli(['order', '--confirm', 'cli-o2', '--json']);
    expect([confirmed.code, json(confirmed).outcome]).toEqual([0, 'confirmed']);

    await cli(['order', a, '--reserve', '--request-id', 'cli-o3']);
    const released = await cli(['order', '--release', 'cli-o3', '--reason', 'payment failed', '--json']);
    expect([released.code, json(released).outcome, json(released).items[0]?.state]).toEqual([0, 'released', 'released']);

    const level = (await t.client.getStock({ couponId: a })).level!;
    expect([level.available, level.held, level.deducted]).toEqual([7n, 0n, 3n]);

    const human = await cli(['order', '--compensate', 'cli-o1']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^COMPENSATED/);
    const usage = await cli(['order', '--confirm', 'x', '--release', 'y']);
    expect([usage.code, usage.stderr]).toEqual([2, expect.stringContaining('cannot be combined')]);
  });
});
