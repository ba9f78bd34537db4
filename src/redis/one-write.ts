// A script sent as one write on the master that serves its key, for the calls that are not batched (holds, order
// records): the script, reads of its key's slot after it, and at the `replica` level the WAIT, on the master's own
// connection. One round trip where the cluster client took two or more (script, then WAIT, then reads), and no
// cluster-client pipeline per command. Redirects, TRYAGAIN and closed connections are followed as the group
// commit follows them (redirects.ts sendFollowing), so a caller's script must be safe to send again: each one
// sent here answers a repeat with the state its first run left.
import type { Cluster } from 'ioredis';
import { luaScript } from './cluster.js';
import { type Command, masterOf, sendOnMaster } from './master-pipeline.js';
import { redirectOf, sendFollowing } from './redirects.js';
import type { ReplicaAck, ReplicationTimeout } from './replica-ack.js';
import type { Reply, ScriptCall } from './scripts.js';

export interface OneWriteOptions {
  /** `replica` level: the WAIT goes in the same write. */
  replicaAck?: ReplicaAck | undefined;
  /** Asked before every send: a fenced slot refuses the write. */
  fence?: { assertOpen(key: string): void } | undefined;
}

/** What one write answered: the script's reply, the master that ran it, the replies of the reads after it
 * (empty when they were not sent: an ASK covers only the command after ASKING), and the WAIT's verdict (null:
 * acknowledged, or no WAIT at the `leader` level). */
export interface Written<T> {
  reply: T;
  node: string;
  reads: [Error | null, unknown][];
  ack: ReplicationTimeout | null;
}

type Results = { results: [Error | null, unknown][]; ack: ReplicationTimeout | null };

const scripts = new Map<string, ReturnType<typeof luaScript>>();
/** A script's text and SHA1, hashed once. */
function scriptOf(name: string): ReturnType<typeof luaScript> {
  let s = scripts.get(name);
  if (!s) {
    s = luaScript(name);
    scripts.set(name, s);
  }
  return s;
}

export class OneWriteSender {
  /** Calls answered; sends that met a redirect (a stale slot map, or the slot moving); sends again as EVAL (the
   * node had not cached the script: restarted, flushed, or a promoted replica). */
  readonly sent = { calls: 0, redirected: 0, loaded: 0 };

  constructor(
    private readonly redis: Cluster,
    private readonly options: OneWriteOptions,
  ) {}

  /** `call` on the master serving `key`, then `reads` (commands on keys of the same slot), then the WAIT. */
  async send<T>(key: string, call: ScriptCall<T>, reads: readonly Command[] = []): Promise<Written<T>> {
    const script = scriptOf(call.name);
    let done: Omit<Written<T>, 'reply'> | undefined;
    const reply = await sendFollowing<unknown>(undefined, {
      owner: () => {
        this.options.fence?.assertOpen(key);
        return masterOf(this.redis, key);
      },
      refresh: () => void this.redis.refreshSlotsCache(),
      send: async (node, asking) => {
        let out = await this.write(node, asking, ['evalsha', script.sha, script.numberOfKeys, ...call.args], reads);
        if (out?.results[0]?.[0]?.message.startsWith('NOSCRIPT')) {
          // Not run: sent again with its text, which also caches it on the node for the next call.
          this.sent.loaded++;
          out = await this.write(node, asking, ['eval', script.lua, script.numberOfKeys, ...call.args], reads);
        }
        if (!out) return undefined;
        const [err, value] = out.results[0]!;
        if (redirectOf(err)) this.sent.redirected++;
        if (!err) done = { node, reads: out.results.slice(1), ack: out.ack };
        return [err, value];
      },
    });
    this.sent.calls++;
    return { reply: call.parse(reply as Reply), ...done! };
  }

  /** `script`, then (unless `asking`) `reads`, and at the `replica` level the WAIT, in one write on `node`'s
   * connection. Undefined when `node` has no ready connection. */
  private async write(node: string, asking: boolean, script: Command, reads: readonly Command[]): Promise<Results | undefined> {
    const commands = asking ? [['asking'], script] : [script, ...reads];
    let out: Results | undefined;
    if (this.options.replicaAck) out = await this.options.replicaAck.pipelineWithWait(node, commands);
    else {
      const results = await sendOnMaster(this.redis, node, commands);
      out = results && { results, ack: null };
    }
    return out && asking ? { results: out.results.slice(1), ack: out.ack } : out;
  }
}
