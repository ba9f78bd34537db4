import { connectCluster } from '../src/redis/cluster.js';
import { Scripts, type BatchOp } from '../src/redis/scripts.js';
import slotOf from 'cluster-key-slot';
const cluster = connectCluster({ nodes: [{ host: '127.0.0.1', port: 7001 }] });
await new Promise((r) => cluster.once('ready', r));
const scripts = new Scripts(cluster, 'luacost' + Date.now(), 3600);
const n = Number(process.argv[2] ?? 1);
const shard = { couponId: 'lc' + n, index: 0, tag: `lc${n}-${Date.now()}#0.0` };
await scripts.shardInit(shard, 1_000_000, 0);
const key = scripts.keys(shard).shard;
const nodeKey = cluster.slots[slotOf(key)]![0];
const node = cluster.nodes('master').find((x) => `${x.options.host}:${x.options.port}` === nodeKey)!;
await node.config('RESETSTAT');
let id = 0;
const calls = Math.ceil(10000 / n);
for (let c = 0; c < calls; c++) {
  const ops: BatchOp[] = [];
  for (let i = 0; i < n; i++) { id++; ops.push({ op: 'D', input: { requestId: `req-${n}-${id}-abcdefgh`, userId: `user-${id}`, quantity: 1, perUserLimit: 0 } }); }
  await scripts.shardBatch(shard, ops, true);
}
const s = (await node.info('commandstats')) as string;
for (const line of s.split('\n')) { const m = /cmdstat_(\w+):calls=(\d+),usec=(\d+)/.exec(line); if (m) console.log(m[1].padEnd(10), 'per script call', (Number(m[3]) / calls).toFixed(2), 'us', ' calls/script', (Number(m[2]) / calls).toFixed(2)); }
cluster.disconnect();
