// Redirect and TRYAGAIN replies as the batchers read them before sending a shard's call to the node that serves
// it, and the ASKs the cluster client follows itself as the replica WAIT reads them.
import { describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import { AskWatch } from '../src/redis/ask-watch.js';
import { isTryAgain, redirectOf } from '../src/redis/redirects.js';

describe('redirect replies', () => {
  it('when a node answers MOVED or ASK, then the slot and the node to ask are read from it', () => {
    expect(redirectOf(new Error('MOVED 8316 127.0.0.1:7102'))).toEqual({ kind: 'moved', slot: 8316, node: '127.0.0.1:7102' });
    expect(redirectOf(new Error('ASK 12 10.0.0.5:6380'))).toEqual({ kind: 'ask', slot: 12, node: '10.0.0.5:6380' });
  });

  it('when an error is anything else, then it is no redirect', () => {
    for (const m of ['TRYAGAIN Multiple keys request during rehashing of slot', 'ERR MOVED', 'NOSCRIPT No matching script', ''])
      expect(redirectOf(new Error(m)), m).toBeUndefined();
    expect(redirectOf('MOVED 1 a:1')).toBeUndefined();
  });

  it('when a slot is half moved, then TRYAGAIN and ioredis’s refusal to re-route a mixed pipeline are both worth a later try, and nothing else is', () => {
    expect(isTryAgain(new Error('TRYAGAIN Multiple keys request during rehashing of slot'))).toBe(true);
    expect(isTryAgain(new Error('All keys in the pipeline should belong to the same slots allocation group'))).toBe(true);
    expect(isTryAgain(new Error('MOVED 1 127.0.0.1:7001'))).toBe(false);
    expect(isTryAgain(new Error('ERR something'))).toBe(false);
    expect(isTryAgain(undefined)).toBe(false);
  });
});

describe('ASKs the cluster client follows by itself', () => {
  it('when the client is redirected by ASK, then the slot and node are noted for a minute and the client still follows it', () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 7001 }], { lazyConnect: true });
    const watch = AskWatch.of(cluster);
    expect(AskWatch.of(cluster)).toBe(watch);
    const followed: string[] = [];
    const handlers = {
      ask: (slot: string, node: string) => followed.push(`ask ${slot} ${node}`),
      moved: (slot: string, node: string) => followed.push(`moved ${slot} ${node}`),
      tryagain: () => followed.push('tryagain'),
      defaults: () => followed.push('defaults'),
      maxRedirections: () => followed.push('max'),
    };
    cluster.handleError(new Error('ASK 12 127.0.0.1:7002'), {}, handlers);
    cluster.handleError(new Error('MOVED 13 127.0.0.1:7003'), {}, handlers);
    cluster.handleError(new Error('ERR other'), {}, handlers);
    // What a cluster pipeline (auto-pipelining) passes on: not an Error, its name and message.
    cluster.handleError({ name: 'ReplyError', message: 'ASK 14 127.0.0.1:7004' } as Error, {}, handlers);
    expect(followed).toEqual(['ask 12 127.0.0.1:7002', 'moved 13 127.0.0.1:7003', 'defaults', 'ask 14 127.0.0.1:7004']);
    expect(watch.nodesAsked(14)).toEqual(['127.0.0.1:7004']);
    expect(watch.nodesAsked(12)).toEqual(['127.0.0.1:7002']);
    expect(watch.nodesAsked(13)).toEqual([]);
    expect(watch.nodesAsked(12, Date.now() + 61_000)).toEqual([]);
    expect(watch.nodesAsked(12)).toEqual([]);
    cluster.disconnect();
  });
});
