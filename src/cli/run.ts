// The CLI's dispatcher: picks the subcommand, handles --help / help / --version, turns errors into one
// line on stderr (and a JSON error object on stdout with --json) and returns the exit code.
import type { Command } from './command.js';
import * as help from './help.js';
import { CliError, EXIT, UsageError } from './errors.js';
import { println, type Io } from './io.js';

export const COMMANDS: Command[] = [
  { name: 'serve', summary: help.SERVE_SUMMARY, help: help.SERVE_HELP, load: async () => (await import('./commands/serve.js')).run },
  { name: 'stack', summary: help.STACK_SUMMARY, help: help.STACK_HELP, load: async () => (await import('./commands/stack.js')).run },
  { name: 'coupon', summary: help.COUPON_SUMMARY, help: help.COUPON_HELP, load: async () => (await import('./commands/coupon.js')).run },
  { name: 'deduct', summary: help.DEDUCT_SUMMARY, help: help.DEDUCT_HELP, load: async () => (await import('./commands/deduct.js')).run },
  {
    name: 'compensate',
    summary: help.COMPENSATE_SUMMARY,
    help: help.COMPENSATE_HELP,
    load: async () => (await import('./commands/compensate.js')).run,
  },
  { name: 'order', summary: help.ORDER_SUMMARY, help: help.ORDER_HELP, load: async () => (await import('./commands/order.js')).run },
  {
    name: 'reserve',
    summary: help.RESERVE_SUMMARY,
    help: help.RESERVE_HELP,
    load: async () => (await import('./commands/hold.js')).reserve,
  },
  {
    name: 'confirm',
    summary: help.CONFIRM_SUMMARY,
    help: help.CONFIRM_HELP,
    load: async () => (await import('./commands/hold.js')).confirm,
  },
  {
    name: 'release',
    summary: help.RELEASE_SUMMARY,
    help: help.RELEASE_HELP,
    load: async () => (await import('./commands/hold.js')).release,
  },
  { name: 'extend', summary: help.EXTEND_SUMMARY, help: help.EXTEND_HELP, load: async () => (await import('./commands/hold.js')).extend },
  { name: 'watch', summary: help.WATCH_SUMMARY, help: help.WATCH_HELP, load: async () => (await import('./commands/watch.js')).run },
  {
    name: 'reconcile',
    summary: help.RECONCILE_SUMMARY,
    help: help.RECONCILE_HELP,
    load: async () => (await import('./commands/reconcile.js')).run,
  },
  { name: 'audit', summary: help.AUDIT_SUMMARY, help: help.AUDIT_HELP, load: async () => (await import('./commands/audit.js')).run },
  {
    name: 'bench',
    summary: help.BENCH_SUMMARY,
    help: help.BENCH_HELP,
    passThrough: true,
    load: async () => (await import('./commands/bench.js')).run,
  },
];

const VERSION = '0.1.0';

export function topHelp(): string {
  const w = Math.max(...COMMANDS.map((c) => c.name.length));
  return `shardstock — operate a shardstock inventory service

Usage: shardstock <command> [options]      shardstock <command> --help      shardstock help <command>

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(w)}  ${c.summary}`).join('\n')}

The commands that call the service talk gRPC to --addr HOST:PORT (default: $SHARDSTOCK_GRPC_ADDR or
127.0.0.1:50051). Human-readable tables by default; --json prints one JSON object per line.

Exit codes: 0 done · 1 failure · 2 usage error · 3 the service said no (sold out, insufficient, user limit,
not deducted, drift found) · 10+N a gRPC error with status N (15 NOT_FOUND, 16 ALREADY_EXISTS,
19 FAILED_PRECONDITION, 22 UNIMPLEMENTED, 24 UNAVAILABLE, 14 DEADLINE_EXCEEDED ...).`;
}

const wantsHelp = (argv: string[]) => argv.includes('--help') || argv.includes('-h');

export async function runCli(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    println(name === undefined ? io.stderr : io.stdout, topHelp());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === '-v') {
    println(io.stdout, VERSION);
    return EXIT.ok;
  }
  if (name === 'help') {
    const c = COMMANDS.find((x) => x.name === rest[0]);
    println(io.stdout, c ? c.help : topHelp());
    return rest[0] === undefined || c ? EXIT.ok : EXIT.usage;
  }
  const command = COMMANDS.find((c) => c.name === name);
  const json = rest.includes('--json');
  try {
    if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}`);
    if (!command.passThrough && wantsHelp(rest)) {
      println(io.stdout, command.help);
      return EXIT.ok;
    }
    return await (await command.load())(rest, io);
  } catch (err) {
    const e = err instanceof CliError ? err : new CliError(`unexpected: ${(err as Error)?.stack ?? String(err)}`);
    const hint = e instanceof UsageError ? ` (see: shardstock ${command ? `${command.name} ` : ''}--help)` : '';
    println(io.stderr, `shardstock${command ? ` ${command.name}` : ''}: ${e.message}${hint}`);
    if (json) println(io.stdout, JSON.stringify({ error: { code: e.code ?? 'FAILURE', exitCode: e.exitCode, message: e.message } }));
    return e.exitCode;
  }
}
