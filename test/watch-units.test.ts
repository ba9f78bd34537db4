// The pieces of WatchStock that need no servers: the per-stream slot and the per-instance change announcer.
import { describe, expect, it } from 'vitest';
import type { StockLevel } from '../src/domain/model.js';
import { ChangeAnnouncer } from '../src/watch/change-announcer.js';
import { LevelSlot } from '../src/watch/level-slot.js';

const level = (available: number): StockLevel => ({
  couponId: 'c',
  totalStock: 10,
  available,
  deducted: 10 - available,
  settledRemaining: 10,
  pendingSettlement: 10 - available,
  soldOut: available === 0,
  shards: [],
  observedAt: new Date(),
});

describe('LevelSlot', () => {
  it('when levels keep arriving and nobody reads, then only the latest is kept', () => {
    const slot = new LevelSlot();
    for (let i = 10; i >= 1; i--) slot.offer(level(i));
    expect(slot.size).toBe(1);
    expect(slot.shift()?.available).toBe(1);
  });

  it('when a sold-out level is followed by newer ones before it is read, then it is kept and the latest waits behind it', () => {
    const slot = new LevelSlot();
    slot.offer(level(2));
    slot.offer(level(0));
    slot.offer(level(1));
    slot.offer(level(3));
    expect(slot.size).toBe(2);
    expect(slot.shift()?.available).toBe(0);
    expect(slot.shift()?.available).toBe(3);
  });

  it('when it is closed while a reader waits or sleeps, then the wait ends with false and no timer is left', async () => {
    const slot = new LevelSlot();
    const waiting = slot.ready();
    slot.close();
    expect(await waiting).toBe(false);
    const slot2 = new LevelSlot();
    const sleeping = slot2.sleep(60_000);
    expect(slot2.hasTimer).toBe(true);
    slot2.close();
    expect(await sleeping).toBe(false);
    expect(slot2.hasTimer).toBe(false);
  });

  it('when a level arrives during the pacing sleep, then the sleep still lasts its full time', async () => {
    const slot = new LevelSlot();
    const started = Date.now();
    const sleeping = slot.sleep(80);
    slot.offer(level(5));
    expect(await sleeping).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(75);
    expect(slot.shift()?.available).toBe(5);
  });
});

describe('ChangeAnnouncer', () => {
  it('when one coupon changes 10,000 times within an interval, then it is announced once, and the low-stock check learns units came back', async () => {
    const announced: string[] = [];
    const after: [string, boolean][] = [];
    const a = new ChangeAnnouncer({ announce: (c) => announced.push(c) }, 30, (c, r) => after.push([c, r]));
    for (let i = 0; i < 10_000; i++) a.changed('x', false);
    a.changed('y', false);
    a.changed('x', true);
    a.changed('x', false);
    expect(announced).toEqual([]);
    await new Promise((r) => setTimeout(r, 60));
    expect(announced.sort()).toEqual(['x', 'y']);
    expect(after.sort()).toEqual([
      ['x', true],
      ['y', false],
    ]);
    expect(a.pending).toBe(0);
    a.close();
  });

  it('when closed, then what was pending is announced and later changes are ignored', () => {
    const announced: string[] = [];
    const a = new ChangeAnnouncer({ announce: (c) => announced.push(c) }, 10_000);
    a.changed('x', false);
    a.close();
    a.changed('y', false);
    expect(announced).toEqual(['x']);
  });
});
