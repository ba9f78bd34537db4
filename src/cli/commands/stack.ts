// shardstock stack up|down|status: the local development stack of deploy/local/stack.ts.
import type { RunFn } from '../command.js';
import { UsageError } from '../errors.js';
import { println } from '../io.js';
import { flag, noMorePositionals, parse, positional } from '../options.js';
import { json, table } from '../render.js';

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, {});
  const action = positional(p, 0, 'up|down|status');
  noMorePositionals(p, 1);
  const stack = await import('../../../deploy/local/stack.js');
  switch (action) {
    case 'up':
      await stack.stackUp();
      break;
    case 'down':
      stack.stackDown();
      break;
    case 'status':
      break;
    default:
      throw new UsageError(`unknown stack action ${JSON.stringify(action)} (up, down, status)`);
  }
  if (action === 'down') return 0;
  const status = await stack.stackStatus();
  if (flag(p, 'json')) json(io.stdout, status);
  else table(io.stdout, ['component', 'state'], Object.entries(status));
  const healthy = status.redis === 'cluster ok' && (status.nats ?? '').startsWith('up') && (status.mysql ?? '').startsWith('up');
  if (!healthy && action === 'status') println(io.stderr, 'the stack is not fully up: run  shardstock stack up');
  return healthy ? 0 : 1;
};
