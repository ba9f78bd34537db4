import { describe, expect, it } from 'vitest';
import { SoldOutCache } from '../src/domain/sold-out-cache.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('SoldOutCache', () => {
  it('when the flag lapses, then exactly one caller re-checks while the others keep refusing', async () => {
    const cache = new SoldOutCache(20);
    cache.mark('c', cache.stamp());
    expect(cache.isSoldOut('c')).toBe(true);
    await sleep(30);
    const answers = Array.from({ length: 100 }, () => cache.isSoldOut('c'));
    expect(answers.filter((a) => !a).length).toBe(1);
    // The re-check found stock: refusals stop at once.
    cache.clear('c');
    expect(cache.isSoldOut('c')).toBe(false);
  });

  it('when stock is returned, then the flag drops before its TTL', () => {
    const listeners: ((id: string) => void)[] = [];
    const cache = new SoldOutCache(60_000, {
      stockReturned: () => {},
      onStockReturned: (l) => {
        listeners.push(l);
        return () => {};
      },
    });
    cache.mark('c', cache.stamp());
    expect(cache.isSoldOut('c')).toBe(true);
    for (const l of listeners) l('c');
    expect(cache.isSoldOut('c')).toBe(false);
  });

  it('when units come back after the reads a sell-out rests on, then its mark is ignored', () => {
    const cache = new SoldOutCache(60_000);
    const readsBegan = cache.stamp();
    // Another instance's Compensate lands and its signal arrives before this caller marks.
    cache.clear('c');
    cache.mark('c', readsBegan);
    expect(cache.isSoldOut('c')).toBe(false);
    // Reads begun after the return may mark.
    cache.mark('c', cache.stamp());
    expect(cache.isSoldOut('c')).toBe(true);
  });
});
