// What a subcommand is: a name, a one-line summary and usage text (src/cli/help.ts, cheap to load) and its
// implementation, imported only when the command runs.
import type { Io } from './io.js';

/** Resolves to the process exit code (see errors.ts). */
export type RunFn = (argv: string[], io: Io) => Promise<number>;

export interface Command {
  name: string;
  summary: string;
  help: string;
  /** Arguments go to another program unchanged (bench): `--help` is not intercepted. */
  passThrough?: boolean;
  load(): Promise<RunFn>;
}
