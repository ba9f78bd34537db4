// The project's root folder (where package.json says "shardstock"), from source (src/cli) or a build
// (dist/src/cli) alike.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function projectRoot(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'shardstock') return dir;
    if (dirname(dir) === dir) throw new Error(`no shardstock package.json above ${from}`);
  }
}
