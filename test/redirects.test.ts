// Redirect and TRYAGAIN replies as the batchers read them before sending a shard's call to the node that serves it.
import { describe, expect, it } from 'vitest';
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
