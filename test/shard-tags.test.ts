import { describe, expect, it } from 'vitest';
import slotOf from 'cluster-key-slot';
import { chooseShardTags, mastersOf, SlotMapPlacement, type SlotOwners } from '../src/redis/shard-tags.js';

/** A slot map like ioredis keeps it: one shared owner array per contiguous range. */
function slotMap(ranges: [master: string, from: number, to: number][]): (string[] | undefined)[] {
  const owners: (string[] | undefined)[] = new Array(16384).fill(undefined);
  for (const [m, from, to] of ranges) {
    const keys = [m, `${m}-replica`];
    for (let s = from; s <= to; s++) owners[s] = keys;
  }
  return owners;
}

const three = () =>
  slotMap([
    ['a:1', 0, 5460],
    ['b:2', 5461, 10922],
    ['c:3', 10923, 16383],
  ]);

function perMaster(tags: string[], owners: SlotOwners): number[] {
  const count = new Map<string, number>();
  for (const t of tags) {
    const m = owners[slotOf(t)]![0]!;
    count.set(m, (count.get(m) ?? 0) + 1);
  }
  return [...count.values()].sort((x, y) => x - y);
}

describe('shard tags', () => {
  it('when 16 shards are placed on 3 masters, then every coupon gets 5/5/6 and consecutive shards go to consecutive masters', () => {
    const owners = three();
    const placement = new SlotMapPlacement(() => owners);
    for (let c = 0; c < 300; c++) {
      const tags = placement.shardTags(`coupon-${c}`, 16);
      expect(tags).toHaveLength(16);
      expect(new Set(tags).size).toBe(16);
      expect(perMaster(tags, owners)).toEqual([5, 5, 6]);
      const first = ['a:1', 'b:2', 'c:3'].indexOf(owners[slotOf(tags[0]!)]![0]!);
      expect(tags.map((t) => owners[slotOf(t)]![0])).toEqual(tags.map((_, i) => ['a:1', 'b:2', 'c:3'][(first + i) % 3]));
      // The cached placement and the one-off choice agree (same salts), so tags never depend on the cache.
      expect(chooseShardTags(`coupon-${c}`, 16, owners)).toEqual(tags);
    }
  });

  it('when 3,000 coupons of 4 shards are placed on 3 masters, then each master holds a third of all shards, not the first one half', () => {
    const owners = three();
    const placement = new SlotMapPlacement(() => owners);
    const held = new Map<string, number>();
    for (let c = 0; c < 3000; c++) {
      const tags = placement.shardTags(`many-${c}`, 4);
      expect(perMaster(tags, owners)).toEqual([1, 1, 2]);
      for (const t of tags) held.set(owners[slotOf(t)]![0]!, (held.get(owners[slotOf(t)]![0]!) ?? 0) + 1);
    }
    // 12,000 shards: a third is 4,000; the extra shard's master is spread by the coupon id's hash.
    for (const m of ['a:1', 'b:2', 'c:3']) expect(Math.abs(held.get(m)! - 4000)).toBeLessThan(200);
  });

  it('when masters own unequal slot ranges, then the shards still spread evenly', () => {
    const owners = slotMap([
      ['a:1', 0, 99],
      ['b:2', 100, 15000],
      ['c:3', 15001, 16300],
      ['d:4', 16301, 16383],
    ]);
    expect(mastersOf(owners)).toEqual(['a:1', 'b:2', 'c:3', 'd:4']);
    for (let c = 0; c < 50; c++) expect(perMaster(chooseShardTags(`u-${c}`, 8, owners), owners)).toEqual([2, 2, 2, 2]);
  });

  it('when a master joins and the client refreshes its slot map, then new coupons use it too', () => {
    let owners = three();
    const placement = new SlotMapPlacement(() => owners, 60_000);
    expect(perMaster(placement.shardTags('before', 6), owners)).toEqual([2, 2, 2]);
    owners = slotMap([
      ['a:1', 0, 4095],
      ['b:2', 4096, 8191],
      ['c:3', 8192, 12287],
      ['d:4', 12288, 16383],
    ]);
    // Still within the list's age and no refresh seen: the old three masters, evenly.
    expect(perMaster(placement.shardTags('stale', 6), owners)).toEqual([2, 2, 2]);
    placement.invalidate();
    expect(perMaster(placement.shardTags('after', 8), owners)).toEqual([2, 2, 2, 2]);
  });

  it('when a listed master has left, then the placement lists the masters again instead of searching in vain', () => {
    let owners = slotMap([
      ['a:1', 0, 4095],
      ['b:2', 4096, 8191],
      ['c:3', 8192, 12287],
      ['d:4', 12288, 16383],
    ]);
    const placement = new SlotMapPlacement(() => owners, 60_000);
    placement.shardTags('warm', 4);
    owners = three();
    const tags = placement.shardTags('after-failover', 6);
    expect(perMaster(tags, owners)).toEqual([2, 2, 2]);
  });

  it('when the list is older than its age, then it is listed again', () => {
    let t = 0;
    let owners = three();
    const placement = new SlotMapPlacement(
      () => owners,
      1000,
      () => t,
    );
    placement.shardTags('first', 3);
    owners = slotMap([
      ['a:1', 0, 8191],
      ['e:5', 8192, 16383],
    ]);
    t = 1001;
    expect(perMaster(placement.shardTags('later', 4), owners)).toEqual([2, 2]);
  });

  it('when the slot map is empty, then the choice fails clearly', () => {
    expect(() => new SlotMapPlacement(() => []).shardTags('x', 4)).toThrow(/slot map is empty/);
    expect(() => chooseShardTags('x', 4, [])).toThrow(/slot map is empty/);
  });
});
