#!/usr/bin/env node
// The `shardstock` command (package.json "bin"). The CLI is TypeScript (bin/cli.ts) and needs Node >= 24,
// while the `node` on PATH may be older (Debian 12 ships 20). This file is plain JS that any Node runs; it
// only chooses how to start the real CLI:
//   - running on Node >= 24 with tsx installed (a development checkout, `npx shardstock`): registers tsx in
//     this process and imports bin/cli.ts — one process, no build step;
//   - an older Node: starts the project's pinned Node 24 (node_modules/node, a devDependency) on itself;
//   - no tsx (a production install, `npm ci --omit=dev`, the Docker image): runs the compiled
//     dist/bin/cli.js that `npm run build` produced.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const major = Number(process.versions.node.split('.')[0]);

function resolveTsx() {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return undefined;
  }
}

if (major >= 24) {
  const tsxApi = resolveTsx();
  const compiled = join(root, 'dist', 'bin', 'cli.js');
  if (tsxApi) {
    const { register } = await import(tsxApi);
    register();
    await import(pathToFileURL(join(root, 'bin', 'cli.ts')).href);
  } else if (existsSync(compiled)) {
    await import(pathToFileURL(compiled).href);
  } else {
    console.error(`shardstock: neither tsx (npm install) nor a build (npm run build) found in ${root}`);
    process.exit(1);
  }
} else {
  const pinned = join(root, 'node_modules', 'node', 'bin', 'node');
  if (!existsSync(pinned)) {
    console.error(`shardstock: needs Node >= 24 (this is ${process.version}); run npm install in ${root} to get the pinned one`);
    process.exit(1);
  }
  const child = spawn(pinned, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  // The terminal sends Ctrl-C to the whole process group: let the child decide, and pass on a SIGTERM.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 143)));
}
