// Debian's Chromium for the page tests, installed with apt when missing (CI runs as root on a fresh machine);
// playwright-core drives it, so no browser is ever downloaded from anywhere else.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    throw new Error(`${CHROMIUM} is missing: run  sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  process.stderr.write('[page test] installing chromium with apt-get\n');
  if (spawnSync('apt-get', ['update'], { stdio: 'inherit', env }).status !== 0) throw new Error('apt-get update failed');
  if (spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], { stdio: 'inherit', env }).status !== 0) {
    throw new Error('apt-get install chromium failed');
  }
}

export function launchChromium(): Promise<Browser> {
  ensureChromium();
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}
