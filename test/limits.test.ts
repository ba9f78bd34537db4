// Cheap calls stay cheap and long ones end: GetStock reads the coupon's MySQL record at most once per short
// interval, unknown coupon ids are remembered in a bounded table with bounded concurrent lookups, a WatchStock
// stream ends after its maximum lifetime, and failure storms log one line per interval.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Readiness } from '../src/app/readiness.js';
import { LEVEL_RECORD_TTL_MS } from '../src/domain/admin.js';
import { CouponCatalog, MAX_LOOKUPS, MAX_MISSING } from '../src/domain/coupon-catalog.js';
import { DomainError } from '../src/domain/errors.js';
import type { Coupon, CouponRepository } from '../src/domain/ports.js';
import { LogThrottle } from '../src/util/log-throttle.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

let t: TestApp;
const finds = new Map<string, number>();
beforeAll(async () => {
  t = await startTestApp({ SHARDSTOCK_MAX_STREAM_LIFETIME_MS: '1500' });
  // Count the record reads that reach MySQL (the same repository object the use cases hold).
  const repo = t.app.repo as { find: (id: string) => Promise<Coupon | null> };
  const find = repo.find;
  repo.find = (id: string) => {
    finds.set(id, (finds.get(id) ?? 0) + 1);
    return find(id);
  };
});
afterAll(async () => t?.close());

describe('MySQL reads per call', () => {
  it('when 200 GetStock calls for one coupon arrive at once, then its MySQL record is read once per interval at most; after the interval, once more', async () => {
    const couponId = uniqueId('gs');
    await t.client.createCoupon({ couponId, totalStock: 100n, shardCount: 2 });
    finds.delete(couponId);
    const started = performance.now();
    const levels = await Promise.all(Array.from({ length: 200 }, () => t.client.getStock({ couponId })));
    const intervals = Math.floor((performance.now() - started) / LEVEL_RECORD_TTL_MS);
    expect(levels.every((r) => r.level?.available === 100n)).toBe(true);
    const during = finds.get(couponId)!;
    console.log(`200 GetStock in ${intervals + 1} interval(s) of ${LEVEL_RECORD_TTL_MS} ms or less: ${during} MySQL read(s)`);
    expect(during).toBeGreaterThanOrEqual(1);
    expect(during).toBeLessThanOrEqual(1 + intervals);
    await new Promise((r) => setTimeout(r, LEVEL_RECORD_TTL_MS + 50));
    await t.client.getStock({ couponId });
    expect(finds.get(couponId)).toBe(during + 1);
  });

  it('when a restock goes through this instance, then the next GetStock shows it at once', async () => {
    const couponId = uniqueId('rs');
    await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 1 });
    expect((await t.client.getStock({ couponId })).level?.totalStock).toBe(10n);
    await t.client.restock({ couponId, quantity: 5n, requestId: 'more' });
    expect((await t.client.getStock({ couponId })).level?.totalStock).toBe(15n);
  });

  it('when 2,000 calls name 40 distinct unknown coupons, then MySQL is asked once per id per second (the negative TTL)', async () => {
    const ids = Array.from({ length: 40 }, () => uniqueId('ghost'));
    const started = performance.now();
    const codes = await Promise.all(
      Array.from({ length: 2000 }, (_, i) =>
        (i % 2 ? t.client.getStock({ couponId: ids[i % 40]! }) : t.client.deduct({ couponId: ids[i % 40]!, requestId: `r${i}` })).then(
          () => 0,
          (e: { code: number }) => e.code,
        ),
      ),
    );
    expect(codes.every((c) => c === 5)).toBe(true); // NOT_FOUND
    const seconds = Math.floor((performance.now() - started) / 1000);
    const asked = ids.map((id) => finds.get(id) ?? 0);
    console.log(`2,000 calls for 40 unknown ids in ${seconds + 1} s or less: ${asked.reduce((a, b) => a + b, 0)} MySQL reads`);
    for (const n of asked) expect(n).toBeGreaterThanOrEqual(1);
    for (const n of asked) expect(n).toBeLessThanOrEqual(1 + seconds);
  });
});

describe('the unknown-coupon table', () => {
  const repo = (find: (id: string) => Promise<Coupon | null>) => ({ find }) as unknown as CouponRepository;

  it(`when ${MAX_MISSING * 2} distinct unknown ids are asked, then at most ${MAX_MISSING} are remembered`, async () => {
    const catalog = new CouponCatalog(repo(async () => null));
    for (let i = 0; i < MAX_MISSING * 2; i++) await catalog.get(`ghost-${i}`).catch(() => {});
    expect(catalog.missingSize).toBe(MAX_MISSING);
    // The newest are the ones kept.
    let asked = 0;
    const counting = new CouponCatalog(
      repo(async () => {
        asked++;
        return null;
      }),
    );
    for (let i = 0; i < MAX_MISSING + 1; i++) await counting.get(`g-${i}`).catch(() => {});
    await counting.get(`g-${MAX_MISSING}`).catch(() => {});
    expect(asked).toBe(MAX_MISSING + 1);
  });

  it(`when MySQL is slow and more than ${MAX_LOOKUPS} distinct ids are looked up at once, then the excess is refused UNAVAILABLE with a retry hint before reaching MySQL`, async () => {
    let asked = 0;
    const catalog = new CouponCatalog(
      repo(() => {
        asked++;
        return new Promise(() => {});
      }),
    );
    for (let i = 0; i < MAX_LOOKUPS; i++) void catalog.get(`slow-${i}`).catch(() => {});
    const refusal = await catalog.get('one-more').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refusal).toBeInstanceOf(DomainError);
    expect((refusal as DomainError).kind).toBe('unavailable');
    expect((refusal as DomainError).retryAfterMs).toBeGreaterThan(0);
    expect(asked).toBe(MAX_LOOKUPS);
  });
});

describe('stream lifetime', () => {
  it('when a WatchStock stream reaches SHARDSTOCK_MAX_STREAM_LIFETIME_MS, then it ends normally (the client reconnects)', async () => {
    const couponId = uniqueId('life');
    await t.client.createCoupon({ couponId, totalStock: 10n, shardCount: 1 });
    const started = performance.now();
    let messages = 0;
    for await (const _ of t.client.watchStock({ couponId })) messages++;
    const ms = performance.now() - started;
    expect(messages).toBeGreaterThanOrEqual(1);
    expect(ms).toBeGreaterThanOrEqual(1400);
    expect(ms).toBeLessThan(5000);
  });
});

describe('log throttle', () => {
  it('when 1,000 failures of one kind come within the interval, then one line gets through, and the next one counts the rest', () => {
    let now = 0;
    const throttle = new LogThrottle(5000, 100, () => now);
    const passed = Array.from({ length: 1000 }, () => throttle.take('Deduct|ReplicationTimeout')).filter((x) => x !== undefined);
    expect(passed).toEqual([0]);
    expect(throttle.take('GetStock|ReplicationTimeout')).toBe(0);
    now = 5001;
    expect(throttle.take('Deduct|ReplicationTimeout')).toBe(999);
  });
});

describe('/readyz', () => {
  it('when a dependency fails, then /readyz names it without its error, and the error kept for the logs has no credentials', async () => {
    const readiness = new Readiness([
      { name: 'redis', ping: async () => 'PONG' },
      {
        name: 'mysql',
        ping: () => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.7:3306 (mysql://shop:s3cret-pw@10.0.0.7:3306/db)')),
        critical: false,
      },
    ]);
    await readiness.check();
    const view = readiness.publicView();
    expect(view).toMatchObject({
      ready: true,
      degraded: ['mysql'],
      failing: ['mysql'],
      checks: { redis: { ok: true }, mysql: { ok: false } },
    });
    expect(JSON.stringify(view)).not.toMatch(/ECONNREFUSED|10\.0\.0\.7|s3cret/);
    expect(readiness.current().checks.mysql?.error).toContain('mysql://[redacted]@10.0.0.7');
    expect(readiness.current().checks.mysql?.error).not.toContain('s3cret');
    // And the real endpoint has the same shape.
    const body = (await (await fetch(`${t.httpUrl}/readyz`)).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ ready: true, failing: [] });
    expect(JSON.stringify(body)).not.toContain('"error"');
  });
});
