// The pieces of access control on their own: token parsing, roles, token buckets (with a fake clock, so
// counts are exact), the in-flight bound, peer normalisation, and the config rules around them.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CallGate, peerHost } from '../src/access/call-gate.js';
import { InFlightLimit } from '../src/access/in-flight-limit.js';
import { mayCall } from '../src/access/policy.js';
import { TokenBuckets } from '../src/access/token-bucket.js';
import { parseTokenEntries, TokenFormatError, TokenRegistry } from '../src/access/tokens.js';
import { ConfigError, loadConfig } from '../src/config.js';
import type { DomainError } from '../src/domain/errors.js';

const refusal = (f: () => unknown) => {
  try {
    f();
    return undefined;
  } catch (err) {
    return err as DomainError;
  }
};

describe('tokens and roles', () => {
  it('when entries are name:role:token, then tokens (colons allowed) map to their caller and role; only digests are kept', () => {
    const entries = parseTokenEntries(['ops:admin:s3cr3t-s3cr3t-s3cr3t', 'shop:deduct:a:b:c:0123456789abcdef'], 'test');
    const reg = new TokenRegistry(entries);
    expect(reg.lookup('s3cr3t-s3cr3t-s3cr3t')).toMatchObject({ name: 'ops', role: 'admin' });
    expect(reg.lookup('a:b:c:0123456789abcdef')).toMatchObject({ name: 'shop', role: 'deduct' });
    expect(reg.lookup('nope')).toBeUndefined();
    expect(JSON.stringify(entries)).not.toContain('s3cr3t');
  });

  it('when an entry is malformed, has an unknown role, a short token or a duplicate token, then it is refused without echoing the token', () => {
    expect(() => parseTokenEntries(['nocolons'], 'x')).toThrow(TokenFormatError);
    expect(() => parseTokenEntries(['a:root:0123456789abcdef0'], 'x')).toThrow(/role/);
    expect(() => parseTokenEntries(['a:admin:short'], 'x')).toThrow(/16 characters/);
    const dup = parseTokenEntries(['a:admin:0123456789abcdef0', 'b:deduct:0123456789abcdef0'], 'x');
    expect(() => new TokenRegistry(dup)).toThrow(/same/);
    try {
      parseTokenEntries(['a:admin:short'], 'x');
    } catch (err) {
      expect(String(err)).not.toContain('short');
    }
  });

  it('when the role is deduct, then only Deduct, Compensate, GetStock and WatchStock are allowed; admin may call everything', () => {
    const all = ['CreateCoupon', 'GetStock', 'Restock', 'Deduct', 'Compensate', 'WatchStock', 'Reconcile'];
    expect(all.filter((m) => mayCall('deduct', m))).toEqual(['GetStock', 'Deduct', 'Compensate', 'WatchStock']);
    expect(all.every((m) => mayCall('admin', m))).toBe(true);
  });
});

describe('token buckets', () => {
  it('when a caller spends its burst, then the next call waits exactly as long as one token takes to refill', () => {
    let now = 0;
    const b = new TokenBuckets(10, 3, 100, () => now);
    expect([b.take('a'), b.take('a'), b.take('a')]).toEqual([0, 0, 0]);
    expect(b.take('a')).toBe(100);
    now = 50;
    expect(b.take('a')).toBe(50);
    now = 100;
    expect(b.take('a')).toBe(0);
    // Another caller has its own bucket.
    expect(b.take('b')).toBe(0);
  });

  it('when a caller rests, then its bucket refills up to the burst and no further', () => {
    let now = 0;
    const b = new TokenBuckets(2, 2, 100, () => now);
    b.take('a');
    b.take('a');
    now = 60_000;
    expect([b.take('a'), b.take('a'), b.take('a')]).toEqual([0, 0, 500]);
  });

  it('when more distinct callers come than the table holds, then it stays bounded (least recently used dropped)', () => {
    const b = new TokenBuckets(1, 1, 1000, () => 0);
    for (let i = 0; i < 5000; i++) b.take(`c${i}`);
    expect(b.callers).toBeLessThanOrEqual(1000);
  });
});

describe('in-flight bound', () => {
  it('when max calls are running, then one more is refused and a release makes room; a double release counts once', () => {
    const l = new InFlightLimit(2);
    const r1 = l.tryEnter()!;
    const r2 = l.tryEnter()!;
    expect(l.tryEnter()).toBeUndefined();
    expect(l.shed).toBe(1);
    r1();
    r1();
    expect(l.inFlight).toBe(1);
    expect(l.tryEnter()).toBeDefined();
    r2();
  });
});

describe('call gate', () => {
  const tokens = new TokenRegistry(parseTokenEntries(['ops:admin:admin-token-0123456789', 'shop:deduct:deduct-token-0123456789'], 't'));

  it('when auth is on, then no token is UNAUTHENTICATED, an unknown one too, and a deduct token on an admin RPC is PERMISSION_DENIED', () => {
    const g = new CallGate({ tokens, ratePerSec: 0, burst: 0, maxInFlight: 0 });
    expect(refusal(() => g.admit('Deduct', { authorization: undefined, peer: '127.0.0.1:1' }))?.kind).toBe('unauthenticated');
    expect(refusal(() => g.admit('Deduct', { authorization: 'Bearer wrong-token-0123456789', peer: '' }))?.kind).toBe('unauthenticated');
    expect(refusal(() => g.admit('Deduct', { authorization: 'Basic deduct-token-0123456789', peer: '' }))?.kind).toBe('unauthenticated');
    expect(refusal(() => g.admit('Restock', { authorization: 'Bearer deduct-token-0123456789', peer: '' }))?.kind).toBe(
      'permission_denied',
    );
    expect(refusal(() => g.admit('Deduct', { authorization: 'bearer deduct-token-0123456789', peer: '' }))).toBeUndefined();
    expect(refusal(() => g.admit('Restock', { authorization: 'Bearer admin-token-0123456789', peer: '' }))).toBeUndefined();
  });

  it('when rate limited, then the refusal is RESOURCE_EXHAUSTED with the wait in retryAfterMs and in the message; token callers are limited per token, others per host', () => {
    const g = new CallGate({ tokens, ratePerSec: 1, burst: 1, maxInFlight: 0 });
    g.admit('Deduct', { authorization: 'Bearer deduct-token-0123456789', peer: '10.0.0.1:1' });
    const e = refusal(() => g.admit('Deduct', { authorization: 'Bearer deduct-token-0123456789', peer: '10.0.0.2:2' }))!;
    expect(e.kind).toBe('resource_exhausted');
    expect(e.retryAfterMs).toBeGreaterThan(900);
    expect(e.message).toMatch(/token:shop.*retry after \d+ ms/);
    expect(refusal(() => g.admit('Deduct', { authorization: 'Bearer admin-token-0123456789', peer: '10.0.0.1:1' }))).toBeUndefined();
    const open = new CallGate({ ratePerSec: 1, burst: 1, maxInFlight: 0 });
    open.admit('GetStock', { authorization: undefined, peer: '[::ffff:10.1.1.1]:5000' });
    expect(refusal(() => open.admit('GetStock', { authorization: undefined, peer: '10.1.1.1' }))?.message).toMatch(/peer:10\.1\.1\.1/);
    expect(refusal(() => open.admit('GetStock', { authorization: undefined, peer: '10.1.1.2:7' }))).toBeUndefined();
  });

  it('when the server is at its in-flight limit, then unary calls are shed UNAVAILABLE with a retry hint while streams still open', () => {
    const g = new CallGate({ ratePerSec: 0, burst: 0, maxInFlight: 1, streaming: new Set(['WatchStock']) });
    const release = g.admit('Deduct', { authorization: undefined, peer: 'p' });
    const e = refusal(() => g.admit('Deduct', { authorization: undefined, peer: 'p' }))!;
    expect([e.kind, e.retryAfterMs]).toEqual(['unavailable', 50]);
    expect(refusal(() => g.admit('WatchStock', { authorization: undefined, peer: 'p' }))).toBeUndefined();
    release();
    expect(refusal(() => g.admit('Deduct', { authorization: undefined, peer: 'p' }))).toBeUndefined();
    expect(g.refused.shed).toBe(1);
  });

  it('when peers come in the forms grpc-js and node give them, then they are reduced to the host', () => {
    expect(
      ['127.0.0.1:5123', 'ipv4:127.0.0.1:5123', '[::1]:5123', 'ipv6:[::1]:80', '::ffff:10.2.3.4', '::1', '10.0.0.9'].map(peerHost),
    ).toEqual(['127.0.0.1', '127.0.0.1', '::1', '::1', '10.2.3.4', '::1', '10.0.0.9']);
  });
});

describe('security settings', () => {
  it('when nothing is set, then auth is off, no rate limit, 4096 calls in flight, plaintext everywhere, failover fence on', () => {
    const c = loadConfig({});
    expect([c.auth, c.authTokens.length, c.rateLimitRps, c.maxInFlight, c.grpcTls, c.redisTls, c.mysqlTls, c.failoverFence]).toEqual([
      'off',
      0,
      0,
      4096,
      undefined,
      undefined,
      undefined,
      true,
    ]);
  });

  it('when tokens come from the environment and a file, then both count; AUTH=token without tokens is refused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tok-'));
    const file = join(dir, 'tokens');
    writeFileSync(file, '# comment\n\nfiled:deduct:file-token-0123456789\n');
    const c = loadConfig({
      SHARDSTOCK_AUTH: 'token',
      SHARDSTOCK_AUTH_TOKENS: 'ops:admin:env-token-0123456789',
      SHARDSTOCK_AUTH_TOKENS_FILE: file,
    });
    expect(c.authTokens.map((t) => `${t.name}/${t.role}`)).toEqual(['ops/admin', 'filed/deduct']);
    expect(() => loadConfig({ SHARDSTOCK_AUTH: 'token' })).toThrow(ConfigError);
    expect(() => loadConfig({ SHARDSTOCK_AUTH: 'maybe' })).toThrow(ConfigError);
    expect(() => loadConfig({ SHARDSTOCK_AUTH_TOKENS_FILE: join(dir, 'missing') })).toThrow(/no such file/);
  });

  it('when TLS files are half given or missing, then start-up is refused with the setting named', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tls-'));
    const pem = join(dir, 'x.pem');
    writeFileSync(pem, '');
    expect(() => loadConfig({ SHARDSTOCK_GRPC_TLS_CERT: pem })).toThrow(/SHARDSTOCK_GRPC_TLS_CERT and SHARDSTOCK_GRPC_TLS_KEY/);
    expect(() => loadConfig({ SHARDSTOCK_GRPC_TLS_CLIENT_CA: pem })).toThrow(/needs SHARDSTOCK_GRPC_TLS_CERT/);
    expect(() => loadConfig({ SHARDSTOCK_REDIS_TLS: 'on', SHARDSTOCK_REDIS_TLS_CA: join(dir, 'nope') })).toThrow(/SHARDSTOCK_REDIS_TLS_CA/);
    expect(loadConfig({ SHARDSTOCK_GRPC_TLS_CERT: pem, SHARDSTOCK_GRPC_TLS_KEY: pem, SHARDSTOCK_GRPC_TLS_CLIENT_CA: pem }).grpcTls).toEqual(
      { certFile: pem, keyFile: pem, clientCaFile: pem },
    );
    expect(loadConfig({ SHARDSTOCK_MYSQL_TLS: 'on', SHARDSTOCK_MYSQL_TLS_CA: pem }).mysqlTls).toEqual({
      caFile: pem,
      certFile: undefined,
      keyFile: undefined,
    });
  });
});
