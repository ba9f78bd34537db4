// The live stock page in headless Chromium: it lists coupons, and the chosen one's level falls on screen
// while deductions run elsewhere, fed by WatchStock over Connect from the browser.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium } from './support/chromium.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

// What the functions run inside the page touch (the project compiles without the DOM library).
declare const document: { getElementById(id: string): { dataset: Record<string, string | undefined>; textContent: string | null } | null };

const SCREENSHOT_DIR = fileURLToPath(new URL('../scratch/', import.meta.url));

let t: TestApp;
let browser: Browser;
beforeAll(async () => {
  // Settlement runs here, so the page shows settled units catching up with deducted ones.
  [t, browser] = await Promise.all([startTestApp({ SHARDSTOCK_WORKERS: 'relay,settle' }), launchChromium()]);
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('live stock page', () => {
  it('when the page serves its files and the coupon list, then they answer with the right types', async () => {
    const id = uniqueId('ui');
    await t.client.createCoupon({ couponId: id, totalStock: 7n, shardCount: 1 });
    const index = await fetch(`${t.httpUrl}/`);
    expect(index.headers.get('content-type')).toContain('text/html');
    expect(await index.text()).toContain('<script type="module" src="/ui/app.js">');
    expect((await fetch(`${t.httpUrl}/ui/app.js`)).headers.get('content-type')).toContain('text/javascript');
    const list = (await (await fetch(`${t.httpUrl}/ui/coupons`)).json()) as { couponId: string; totalStock: number }[];
    expect(list.find((c) => c.couponId === id)).toMatchObject({ totalStock: 7, shardCount: 1 });
    expect(list.length).toBeLessThanOrEqual(50);
  });

  it('when a coupon is chosen in the list and deductions run, then the page shows its level dropping to 0 and sold out, per shard, with settled catching up', async () => {
    const id = uniqueId('ui');
    const total = 400;
    await t.client.createCoupon({ couponId: id, totalStock: BigInt(total), shardCount: 8 });
    const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    try {
      await page.goto(`${t.httpUrl}/`);
      await page.locator(`nav button[data-coupon="${id}"]`).click();
      const shown = () => page.evaluate(() => Number(document.getElementById('detail')!.dataset.available ?? NaN));
      await page.waitForFunction((n) => document.getElementById('detail')!.dataset.available === String(n), total);
      expect(await page.locator('.shard').count()).toBe(8);
      expect(await page.locator('#status').textContent()).toBe('live');

      // A hold shows as held, not available and not deducted, until it is released.
      const hold = await t.client.reserve({ couponId: id, requestId: 'ui-hold', quantity: 5n, ttlMs: 60_000 });
      await page.waitForFunction(() => document.getElementById('held')!.textContent === '5');
      expect([await shown(), await page.locator('#deducted').textContent()]).toEqual([total - 5, '0']);
      await t.client.release({ target: { case: 'holdId', value: hold.hold!.holdId } });
      await page.waitForFunction((n) => document.getElementById('detail')!.dataset.available === String(n), total);
      expect(await page.locator('#held').textContent()).toBe('0');

      // Deductions from Node over gRPC, paced so they last a few seconds, while the page is sampled.
      let next = 0;
      const load = Promise.all(
        Array.from({ length: 4 }, async () => {
          while (next < total) {
            await t.client.deduct({ couponId: id, requestId: `u${next++}`, quantity: 1n });
            await new Promise((r) => setTimeout(r, 25));
          }
        }),
      );
      const samples: number[] = [];
      let screenshot = false;
      let loadDone = false;
      void load.then(() => (loadDone = true));
      while (!loadDone) {
        const v = await shown();
        samples.push(v);
        if (!screenshot && v < total * 0.6 && v > total * 0.2) {
          mkdirSync(SCREENSHOT_DIR, { recursive: true });
          await page.screenshot({ path: `${SCREENSHOT_DIR}page-live.png` });
          screenshot = true;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      await load;
      await page.waitForFunction(() => document.getElementById('detail')!.dataset.available === '0', undefined, { timeout: 15_000 });
      await page.locator('#sold-out').waitFor({ state: 'visible' });
      expect(await page.locator('#deducted').textContent()).toBe(String(total));

      // The level fell on screen while the deductions ran: several distinct values, never going up.
      const distinct = [...new Set(samples)];
      expect(distinct.filter((v) => v > 0 && v < total).length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < samples.length; i++) expect(samples[i]!).toBeLessThanOrEqual(samples[i - 1]!);
      // Every shard bar is empty at the end.
      const shardTexts = await page.locator('.shard .n').allTextContents();
      expect(shardTexts).toEqual(Array(8).fill('0'));
      // Settlement catches up: MySQL's settled count reaches the deducted one, pushed to the page.
      await page.waitForFunction((n) => document.getElementById('settled')!.textContent === String(n), total, { timeout: 30_000 });
      expect(await page.locator('#pending').textContent()).toBe('0');
      await page.waitForTimeout(400); // let the bars' CSS transitions finish
      await page.screenshot({ path: `${SCREENSHOT_DIR}page-sold-out.png` });
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("when the sale is paused and a request is looked up, then the page shows the pause badge and the request's audit trail", async () => {
    const id = uniqueId('ui');
    await t.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 1 });
    await t.client.deduct({ couponId: id, requestId: 'seen', quantity: 2n });
    const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    try {
      await page.goto(`${t.httpUrl}/#${id}`);
      await page.waitForFunction(() => document.getElementById('detail')!.dataset.available === '3');
      expect(await page.locator('#sale').isVisible()).toBe(false);
      await t.client.pauseSale({ couponId: id, reason: 'page test' });
      await page.locator('#sale').waitFor({ state: 'visible' });
      expect(await page.locator('#sale').textContent()).toBe('SALE PAUSED');

      await page.locator('#audit-request').fill('seen');
      await page.locator('#audit button').click();
      await page.waitForFunction(() => (document.getElementById('audit-out')!.textContent ?? '').startsWith('DEDUCTED'));
      expect(await page.locator('#audit-out').textContent()).toContain('redis: 2 units on shard 0');
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe('live stock page with auth on', () => {
  const TOKEN = 'page-viewer-7c3e1a9f5b2d8046';
  const ADMIN = 'page-admin-2e8b4f0c6a1d9357';
  let secured: TestApp;
  beforeAll(async () => {
    secured = await startTestApp({ SHARDSTOCK_AUTH: 'token', SHARDSTOCK_AUTH_TOKENS: `viewer:deduct:${TOKEN},ops:admin:${ADMIN}` });
  });
  afterAll(async () => secured?.close());

  it('when the page has no token, then it asks for one; once a token is entered, it lists the coupons and streams the chosen level', async () => {
    const id = uniqueId('uiauth');
    await secured.client.createCoupon({ couponId: id, totalStock: 9n, shardCount: 1 }, { metadata: { authorization: `Bearer ${ADMIN}` } });
    const page = await browser.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    try {
      await page.goto(`${secured.httpUrl}/`);
      await page.locator('#coupons').getByText('enter a valid token above').waitFor();
      await page.locator('#token').fill(TOKEN);
      await page.locator('#token').press('Enter');
      await page.locator(`nav button[data-coupon="${id}"]`).click();
      await page.waitForFunction(() => document.getElementById('detail')!.dataset.available === '9');
      expect(await page.locator('#status').textContent()).toBe('live');
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
