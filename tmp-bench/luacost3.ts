import { connectCluster, luaScript } from '../src/redis/cluster.js';
import { Scripts, type BatchOp } from '../src/redis/scripts.js';
import slotOf from 'cluster-key-slot';
const cluster = connectCluster({ nodes: [{ host: '127.0.0.1', port: 7001 }] });
await new Promise((r) => cluster.once('ready', r));
const scripts = new Scripts(cluster, 'luacost' + Date.now(), 3600);
const full = luaScript('shardBatch').lua;
const variants: [string, string][] = [
  ['defs only', full.replace('local windowSec = tonumber(ARGV[1])', 'do return 1 end\nlocal windowSec = tonumber(ARGV[1])')],
  ['after state HMGET', full.replace("local slot = writeSlot(windowSec, firstBucket)", 'do return 1 end\nlocal slot = writeSlot(windowSec, firstBucket)')],
  ['after openRun', full.replace("-- From three requests on", 'do return 1 end\n-- From three requests on')],
  ['before loop', full.replace("local vouched = false", 'do return 1 end\nlocal vouched = false')],
  ['before closeRun', full.replace("\ncloseRun(run)\nif vouch", '\ndo return 1 end\ncloseRun(run)\nif vouch')],
  ['after closeRun', full.replace("\ncloseRun(run)\nif vouch", '\ncloseRun(run)\ndo return 1 end\nif vouch')],
  ['full', full],
];
let id = 0;
for (const n of [1, 16]) for (const [label, lua] of variants) {
  const shard = { couponId: 'lc', index: 0, tag: `lc-${label.length}-${n}-${Date.now()}#0.0` };
  await scripts.shardInit(shard, 1_000_000, 0);
  const key = scripts.keys(shard).shard;
  const nodeKey = cluster.slots[slotOf(key)]![0];
  const node = cluster.nodes('master').find((x) => `${x.options.host}:${x.options.port}` === nodeKey)!;
  const sha = (await node.script('LOAD', lua)) as string;
  await node.config('RESETSTAT');
  const calls = Math.ceil(8000 / n);
  for (let c = 0; c < calls; c++) {
    const ops: BatchOp[] = [];
    for (let i = 0; i < n; i++) { id++; ops.push({ op: 'D', input: { requestId: `req-${id}-abcdefgh`, userId: `user-${id}`, quantity: 1, perUserLimit: 0 } }); }
    const args = scripts.shardBatchArgs(shard, ops, true);
    await node.evalsha(sha, 7, ...args);
  }
  const s = (await node.info('commandstats')) as string;
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(s)!;
  console.log(`batch ${n}`, label.padEnd(20), (Number(m[2]) / Number(m[1])).toFixed(1), 'us/call');
}
cluster.disconnect();
