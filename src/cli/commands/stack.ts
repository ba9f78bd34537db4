// shardstock stack setup|up|down|status|reset: the local development stack of deploy/local/stack.ts.
import type { RunFn } from '../command.js';
import { UsageError } from '../errors.js';
import { println } from '../io.js';
import { flag, noMorePositionals, parse, positional } from '../options.js';
import { json, table } from '../render.js';

export const run: RunFn = async (argv, io) => {
  const p = parse(argv, {});
  const action = positional(p, 0, 'setup|up|down|status|reset');
  noMorePositionals(p, 1);
  const stack = await import('../../../deploy/local/stack.js');
  switch (action) {
    case 'setup':
      await stack.stackSetup();
      return 0;
    case 'up':
      await stack.stackUp();
      break;
    case 'down':
      await stack.stackDown();
      return 0;
    case 'reset':
      await stack.stackReset();
      println(io.stderr, 'reset done: `shardstock stack up` starts a new, empty stack');
      return 0;
    case 'status':
      break;
    default:
      throw new UsageError(`unknown stack action ${JSON.stringify(action)} (setup, up, down, status, reset)`);
  }
  const status = await stack.stackStatus();
  if (flag(p, 'json')) json(io.stdout, status);
  else table(io.stdout, ['component', 'state'], Object.entries(status));
  const healthy = status.redis === 'cluster ok' && (status.nats ?? '').startsWith('up') && (status.mysql ?? '').startsWith('up');
  if (!healthy && action === 'status') println(io.stderr, 'the stack is not fully up: run  shardstock stack up');
  return healthy ? 0 : 1;
};
