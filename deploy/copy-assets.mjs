// Part of `npm run build`: puts the files the compiled code reads at run time where it looks for them,
// relative to itself: lua/ beside dist/src (src/redis/cluster.ts reads ../../lua/) and every non-TypeScript
// file under src/ (the live page's static files) at the same place under dist/src/.
import { cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

cpSync('lua', 'dist/lua', { recursive: true });
for (const entry of readdirSync('src', { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
  const from = join(entry.parentPath, entry.name);
  cpSync(from, join('dist', from));
}
