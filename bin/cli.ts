// The operator CLI's entry (started by bin/shardstock.mjs, or `npx tsx bin/cli.ts`). Ctrl-C / SIGTERM abort
// the running command cleanly (watch and load runs print what they have); a second Ctrl-C exits at once.
import { runCli } from '../src/cli/run.js';

// grpc-js names an IP address as the TLS server name when the address is one (Node's DEP0123, printed once):
// nothing an operator can act on, and it would break the one-line error a failed command prints.
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const code = typeof rest[0] === 'object' ? (rest[0] as { code?: string } | null)?.code : rest[1];
  if (code === 'DEP0123') return;
  (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;

const ac = new AbortController();
let interrupts = 0;
const interrupt = () => {
  if (++interrupts > 1) process.exit(130);
  ac.abort();
};
const serving = process.argv[2] === 'serve';
// `serve` hands the process to src/main.ts, which installs its own shutdown handlers.
if (!serving) {
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
}

const code = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, signal: ac.signal });
// Lingering sockets (a gRPC channel closing) must not keep a finished command alive.
process.exit(code);
