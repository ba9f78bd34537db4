// The one step that installs Debian packages: every program the stack or a test suite runs, checked by its path
// and installed together with apt when one is missing (as root; otherwise it prints the command and fails).
// Nothing else in the project installs packages, so no test's time ever includes an install.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { portOpen, waitFor } from './wait.js';

export interface Program {
  bin: string;
  pkg: string;
}

/** What the local stack runs itself. */
export const STACK_PROGRAMS: Program[] = [
  { bin: 'redis-server', pkg: 'redis-server' },
  { bin: 'redis-cli', pkg: 'redis-tools' },
  { bin: 'nats-server', pkg: 'nats-server' },
];

/** What the stack needs only when it runs its own MariaDB (nothing answers on its port). */
export const MARIADB_PROGRAMS: Program[] = [
  { bin: 'mariadbd', pkg: 'mariadb-server' },
  { bin: 'mariadb-install-db', pkg: 'mariadb-server' },
  { bin: 'mariadb', pkg: 'mariadb-client' },
];

/** What the test suites start on their own (private nats-server / redis-server, certificates, the page test). */
export const TEST_PROGRAMS: Program[] = [
  { bin: 'chromium', pkg: 'chromium' },
  { bin: 'openssl', pkg: 'openssl' },
];

/** Services Debian starts when their package is installed, with the port each takes. */
const PACKAGED_SERVICES = [
  { pkg: 'redis-server', service: 'redis-server', port: 6379 },
  { pkg: 'nats-server', service: 'nats-server', port: 4222 },
  { pkg: 'mariadb-server', service: 'mariadb', port: 3306 },
];

const log = (msg: string) => process.stderr.write(`[stack] ${msg}\n`);

/** What the set-up step itself runs to install packages and stop the services an install started. */
export const SETUP_TOOLS = ['apt-get', 'service'];

export function which(bin: string): string | undefined {
  for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    if (existsSync(join(dir, bin))) return join(dir, bin);
  }
  return undefined;
}

/** The Debian packages that provide the missing programs, each once. */
export function missingPackages(programs: Program[]): string[] {
  return [...new Set(programs.filter((p) => !which(p.bin)).map((p) => p.pkg))];
}

/**
 * Installs the packages of the missing programs in one apt-get run (with one `apt-get update`), or, when not
 * root, fails with the exact command to run. Does nothing, and asks apt nothing, when every program is there.
 * A service that the install started on a port that was free before is stopped again: the stack runs its own
 * there, or nobody asked for it. A service that was answering before the install is never touched.
 */
export async function installPrograms(programs: Program[]): Promise<void> {
  const pkgs = missingPackages(programs);
  if (pkgs.length === 0) return;
  const install = `apt-get install -y --no-install-recommends ${pkgs.join(' ')}`;
  if (process.getuid?.() !== 0 || !which('apt-get')) {
    throw new Error(`missing Debian packages ${pkgs.join(', ')}: run  sudo apt-get update && sudo ${install}`);
  }
  const services = PACKAGED_SERVICES.filter((s) => pkgs.includes(s.pkg));
  const answeredBefore = await Promise.all(services.map((s) => portOpen(s.port)));

  log(`installing ${pkgs.join(' ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (spawnSync('apt-get', ['update'], { stdio: 'inherit', env }).status !== 0) throw new Error('apt-get update failed');
  if (spawnSync('sh', ['-c', install], { stdio: 'inherit', env }).status !== 0) throw new Error(`${install} failed`);

  for (const [i, s] of services.entries()) {
    if (answeredBefore[i] || !(await portOpen(s.port))) continue;
    log(`stopping the ${s.service} service that installing ${s.pkg} started on port ${s.port}`);
    spawnSync('service', [s.service, 'stop'], { stdio: 'inherit' });
    await waitFor(`${s.service} to release port ${s.port}`, async () => !(await portOpen(s.port)), 15_000);
  }
  const still = missingPackages(programs);
  if (still.length > 0) throw new Error(`${still.join(', ')} still missing after ${install}`);
}
