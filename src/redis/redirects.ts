// What a Redis Cluster node's redirect and TRYAGAIN replies say, for callers that follow them by hand.

/** MOVED: the slot lives on `node` now. ASK: this one command goes to `node` (after ASKING), the slot being
 * half moved there. */
export interface Redirect {
  kind: 'moved' | 'ask';
  slot: number;
  node: string;
}

/** The redirect an error carries, or undefined when it is not one. */
export function redirectOf(err: unknown): Redirect | undefined {
  if (!(err instanceof Error)) return undefined;
  const m = /^(MOVED|ASK) (\d+) (\S+)/.exec(err.message);
  if (!m) return undefined;
  return { kind: m[1] === 'ASK' ? 'ask' : 'moved', slot: Number(m[2]), node: m[3]! };
}

/** TRYAGAIN: a multi-key command met its slot half moved (some keys here, some gone); it can succeed later.
 * Also ioredis's refusal to follow a MOVED for an auto-pipelined batch whose commands now route to different
 * nodes: the command was not sent again, and the MOVED said it had not run. */
export function isTryAgain(err: unknown): boolean {
  return (
    err instanceof Error &&
    (err.message.startsWith('TRYAGAIN') || err.message.startsWith('All keys in the pipeline should belong to the same slots'))
  );
}
