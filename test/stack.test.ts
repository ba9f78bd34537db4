// The local stack never destroys data: on a private cluster (ports 7301-7306, data under .data/stack-test, never
// the shared one) `up` restarts only the nodes that are missing, from their own AOF and nodes.conf, and they
// rejoin; `down` and a refused `up` delete nothing; `reset` is the only path that deletes, and names what it
// deletes first; a pidfile that names another process never gets it signalled.
// Like the other tests that start their own cluster, run it alone under the machine-wide lock when others share
// the machine:  flock /tmp/shardstock-owncluster.lock npx vitest run test/stack.test.ts
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  clusterHealthy,
  createRedisCluster,
  nodePid,
  type RedisLayout,
  redisCli,
  redisDown,
  redisReset,
  redisUp,
} from '../deploy/local/redis-cluster.js';
import { portOpen, sleep, waitFor } from '../deploy/local/wait.js';

const PORTS = [7301, 7302, 7303, 7304, 7305, 7306];
const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const layout: RedisLayout = { ports: PORTS, dirOf: (port) => join(ROOT, '.data', 'stack-test', 'redis', String(port)) };
const pidFileOf = (port: number) => join(layout.dirOf(port), 'redis.pid');
const KEY = 'stack-test:kept';

const pids = () => new Map(PORTS.map((p) => [p, nodePid(layout, p)]));
const get = (key: string) => redisCli(PORTS[0]!, '-c', 'get', key);

/** The master that owns `key`'s slot, and its replica, as the cluster sees them now. */
function ownersOf(key: string): { master: number; replica: number } {
  const slot = Number(redisCli(PORTS[0]!, 'cluster', 'keyslot', key));
  const nodes = redisCli(PORTS[0]!, 'cluster', 'nodes')
    .split('\n')
    .map((l) => l.split(' '))
    .map((f) => ({ id: f[0]!, port: Number(f[1]!.split(':')[1]!.split('@')[0]), flags: f[2]!, masterId: f[3]!, slots: f.slice(8) }));
  const master = nodes.find(
    (n) =>
      n.flags.includes('master') &&
      n.slots.some((r) => {
        const [a, b] = r.split('-').map(Number);
        return slot >= a! && slot <= (b ?? a!);
      }),
  )!;
  const replica = nodes.find((n) => n.masterId === master.id && !n.flags.includes('fail'))!;
  return { master: master.port, replica: replica.port };
}

async function kill(port: number): Promise<void> {
  process.kill(nodePid(layout, port)!, 'SIGKILL');
  await waitFor(`redis ${port} to die`, async () => !(await portOpen(port)), 10_000);
}

/** A process whose command line looks like the node's server (binary name and port) but which listens nowhere. */
function impostor(port: number): ChildProcess {
  return spawn('bash', ['-c', `exec -a "redis-server 127.0.0.1:${port} [cluster]" sleep 300`], { stdio: 'ignore' });
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const impostors: ChildProcess[] = [];

beforeAll(async () => {
  // Whatever an interrupted earlier run left: the explicit path that deletes, on this test's own ports.
  await redisReset(layout);
});

afterAll(async () => {
  for (const p of impostors) p.kill('SIGKILL');
  await redisReset(layout);
});

describe('local redis cluster (private ports 7301-7306)', () => {
  it('when no node directory has ever held a cluster, then up creates one, every node on AOF with fsync every second and the tuned stream nodes', async () => {
    const r = await redisUp(layout);
    expect(r).toEqual({ action: 'created', started: PORTS });
    expect(clusterHealthy(PORTS)).toBe(true);
    for (const port of PORTS) {
      expect(redisCli(port, 'config', 'get', 'appendonly')).toBe('appendonly\nyes');
      expect(redisCli(port, 'config', 'get', 'appendfsync')).toBe('appendfsync\neverysec');
      expect(redisCli(port, 'config', 'get', 'stream-node-max-bytes')).toBe('stream-node-max-bytes\n512');
    }
    expect(redisCli(PORTS[0]!, '-c', 'set', KEY, 'before-any-restart')).toBe('OK');
    // everysec: give the AOF its second before any node is killed.
    await sleep(1_200);
    // A cluster started before the setting existed gets it when reused.
    redisCli(PORTS[1]!, 'config', 'set', 'stream-node-max-bytes', '4096');
    expect(await redisUp(layout)).toEqual({ action: 'reused', started: [] });
    expect(redisCli(PORTS[1]!, 'config', 'get', 'stream-node-max-bytes')).toBe('stream-node-max-bytes\n512');
  });

  it('when one master is killed, then up restarts only that node, it rejoins and the cluster is healthy with the key', async () => {
    const before = pids();
    const { master } = ownersOf(KEY);
    await kill(master);
    const t0 = performance.now();
    const r = await redisUp(layout);
    const ms = performance.now() - t0;
    expect(r).toEqual({ action: 'restarted', started: [master] });
    const after = pids();
    for (const port of PORTS) {
      if (port === master) expect(after.get(port)).not.toBe(before.get(port));
      else expect(after.get(port)).toBe(before.get(port));
    }
    expect(clusterHealthy(PORTS)).toBe(true);
    expect(get(KEY)).toBe('before-any-restart');
    console.log(`[stack test] one node restarted and rejoined in ${ms.toFixed(0)} ms`);
  });

  it('when a master and its replica are both killed, then up restarts just those two and the key comes back from their AOF', async () => {
    expect(redisCli(PORTS[0]!, '-c', 'set', KEY, 'only-on-disk-after-the-kill')).toBe('OK');
    await sleep(1_200);
    const { master, replica } = ownersOf(KEY);
    const before = pids();
    await kill(master);
    await kill(replica);
    // No node that is still up holds the key now: it can only come back from the two nodes' own AOF files.
    const t0 = performance.now();
    const r = await redisUp(layout);
    const ms = performance.now() - t0;
    expect(r.action).toBe('restarted');
    expect(r.started.sort()).toEqual([master, replica].sort());
    for (const port of PORTS.filter((p) => p !== master && p !== replica)) expect(pids().get(port)).toBe(before.get(port));
    expect(get(KEY)).toBe('only-on-disk-after-the-kill');
    expect(readFileSync(join(layout.dirOf(master), 'redis.log'), 'utf8')).toMatch(/DB loaded from append only file/);
    console.log(`[stack test] a master and its replica restarted from AOF and rejoined in ${ms.toFixed(0)} ms`);
  });

  it("when a replica's directory is lost with it, then up starts it empty and it rejoins as a replica; the others keep running", async () => {
    const { replica } = ownersOf(KEY);
    const before = pids();
    await kill(replica);
    rmSync(layout.dirOf(replica), { recursive: true, force: true });
    const r = await redisUp(layout);
    expect(r).toEqual({ action: 'restarted', started: [replica] });
    for (const port of PORTS.filter((p) => p !== replica)) expect(pids().get(port)).toBe(before.get(port));
    expect(clusterHealthy(PORTS)).toBe(true);
    expect(redisCli(replica, 'info', 'replication')).toContain('master_link_status:up');
    // Every node knows exactly six: the lost node's old id was forgotten everywhere.
    for (const port of PORTS) expect(redisCli(port, 'cluster', 'info')).toContain('cluster_known_nodes:6');
    expect(get(KEY)).toBe('only-on-disk-after-the-kill');
  });

  it('when a pidfile names another process, then down leaves it and its node alone, up refuses instead of wiping, and nothing is deleted', async () => {
    const victim = PORTS[1]!;
    const realPid = nodePid(layout, victim)!;
    const fake = impostor(victim);
    impostors.push(fake);
    await waitFor('the impostor to start', async () => readFileSync(`/proc/${fake.pid}/cmdline`, 'utf8').includes('redis-server'), 5_000);
    writeFileSync(pidFileOf(victim), `${fake.pid}\n`);
    expect(nodePid(layout, victim)).toBeUndefined();

    const down = await redisDown(layout);
    expect(down.stopped.sort()).toEqual(PORTS.filter((p) => p !== victim));
    expect(down.notOurs).toEqual([victim]);
    expect(alive(fake.pid!)).toBe(true);
    expect(alive(realPid)).toBe(true);
    for (const port of PORTS) {
      expect(existsSync(join(layout.dirOf(port), 'nodes.conf'))).toBe(true);
      expect(existsSync(join(layout.dirOf(port), 'appendonlydir'))).toBe(true);
    }

    await expect(redisUp(layout)).rejects.toThrow(/port 7302 is taken by a process this stack did not start/);
    expect(alive(fake.pid!)).toBe(true);
    for (const port of PORTS) expect(existsSync(join(layout.dirOf(port), 'nodes.conf'))).toBe(true);

    // With the true pid back, up restarts the five stopped nodes from their data: a whole-cluster restart.
    writeFileSync(pidFileOf(victim), `${realPid}\n`);
    const t0 = performance.now();
    const r = await redisUp(layout);
    console.log(`[stack test] five stopped nodes restarted from their data and rejoined in ${(performance.now() - t0).toFixed(0)} ms`);
    expect(r).toEqual({ action: 'restarted', started: PORTS.filter((p) => p !== victim) });
    expect(get(KEY)).toBe('only-on-disk-after-the-kill');
  });

  it('when reset runs, then it names every directory before deleting it, deletes only those, and signals no foreign pid', async () => {
    const victim = PORTS[5]!;
    await kill(victim);
    const fake = impostor(victim);
    impostors.push(fake);
    await waitFor('the impostor to start', async () => readFileSync(`/proc/${fake.pid}/cmdline`, 'utf8').includes('redis-server'), 5_000);
    writeFileSync(pidFileOf(victim), `${fake.pid}\n`);

    const said: string[] = [];
    let existedWhenListed = false;
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      const text = String(chunk);
      if (text.includes('reset deletes:')) existedWhenListed = PORTS.every((p) => existsSync(layout.dirOf(p)));
      said.push(text);
      return write(chunk, ...rest);
    }) as typeof process.stderr.write;
    let result: Awaited<ReturnType<typeof redisReset>>;
    try {
      result = await redisReset(layout);
    } finally {
      process.stderr.write = write;
    }
    expect(result.deleted).toEqual(PORTS.map((p) => layout.dirOf(p)));
    expect(result.kept).toEqual([]);
    expect(existedWhenListed).toBe(true);
    const listing = said.join('');
    for (const port of PORTS) expect(listing).toContain(layout.dirOf(port));
    for (const port of PORTS) expect(existsSync(layout.dirOf(port))).toBe(false);
    for (const port of PORTS) expect(await portOpen(port)).toBe(false);
    expect(alive(fake.pid!)).toBe(true);
    expect(existsSync(join(ROOT, '.data', 'stack-test'))).toBe(true);
  });

  it('when a master that kept no data on disk (a cluster from before AOF) is killed, then up starts it only after its replica took over, and the key survives', async () => {
    await createRedisCluster(PORTS, layout.dirOf, { persistence: 'none' });
    expect(redisCli(PORTS[0]!, '-c', 'set', KEY, 'on-the-replica-only')).toBe('OK');
    const { master, replica } = ownersOf(KEY);
    // A keyless WAIT from another connection proves nothing: wait until the replica's offset reaches the master's.
    const offset = (port: number, field: string) =>
      Number(new RegExp(`(?:^|\\n)${field}:(\\d+)`).exec(redisCli(port, 'info', 'replication'))?.[1] ?? -1);
    const written = offset(master, 'master_repl_offset');
    await waitFor('the replica to have the key', async () => offset(replica, 'slave_repl_offset') >= written, 10_000);
    await kill(master);
    const r = await redisUp(layout);
    expect(r).toEqual({ action: 'restarted', started: [master] });
    expect(ownersOf(KEY)).toEqual({ master: replica, replica: master });
    expect(redisCli(master, 'info', 'replication')).toContain('role:slave');
    expect(get(KEY)).toBe('on-the-replica-only');
  });
});
