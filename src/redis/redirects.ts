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
  // An Error, or the plain { name, message } ioredis's cluster pipelines pass on for a redirect.
  const message = (err as { message?: unknown } | null | undefined)?.message;
  if (typeof message !== 'string') return undefined;
  const m = /^(MOVED|ASK) (\d+) (\S+)/.exec(message);
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

/** How often a call sent by hand follows a redirect or waits out TRYAGAIN before it gives up: as the cluster
 * client's maxRedirections. A slot's keys move in milliseconds each. */
const FOLLOW_ATTEMPTS = 16;
/** Between tries after TRYAGAIN (the client's retryDelayOnTryAgain). */
const TRY_AGAIN_MS = 100;
/** Between tries after a closed connection or none ready (the client's retryDelayOnFailover). */
const RECONNECT_MS = 200;

/** How a call reaches a node's own connection, for sendFollowing. */
export interface NodeRoute<T> {
  /** The slot's master as the client's map has it now (it may throw: the failover fence). */
  owner(): string | undefined;
  /** The call on `node`'s connection, after ASKING when `asking`: its [error, value]; undefined when that node
   * has no ready connection. */
  send(node: string, asking: boolean): Promise<[Error | null, T] | undefined>;
  /** The client's slot map proved stale. */
  refresh(): void;
}

/**
 * Sends a call to the node that serves its slot, as the cluster client does for a command sent alone: to the
 * slot map's master, then wherever MOVED or ASK (with ASKING) points; TRYAGAIN, a closed connection or no
 * ready connection are waited out. `first`: the redirect or TRYAGAIN that sent the call here, if any. Throws
 * any other error reply, and the last one after FOLLOW_ATTEMPTS tries.
 */
export async function sendFollowing<T>(first: Error | undefined, route: NodeRoute<T>): Promise<T> {
  let err = first;
  for (let attempt = 0; attempt < FOLLOW_ATTEMPTS; attempt++) {
    const to = err && redirectOf(err);
    if (to?.kind === 'moved') route.refresh();
    else if (err && !to) await sleep(TRY_AGAIN_MS);
    // Asked every time, also when a redirect names the node: the failover fence may refuse the write.
    const owner = route.owner();
    const node = to ? to.node : owner;
    let out: [Error | null, T] | undefined;
    try {
      out = node === undefined ? undefined : await route.send(node, to?.kind === 'ask');
    } catch {
      // The connection closed under the call: whether it ran is unknown; sending it again is safe (request ids).
      out = undefined;
    }
    if (!out) {
      route.refresh();
      await sleep(RECONNECT_MS);
      err = undefined;
      continue;
    }
    const [e, value] = out;
    if (!e) return value;
    if (!redirectOf(e) && !isTryAgain(e)) throw e;
    err = e;
  }
  throw err ?? new Error('the slot kept moving, or no node that serves it could be reached');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
