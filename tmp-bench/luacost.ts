import { connectCluster } from '../src/redis/cluster.js';
import { Scripts, type BatchOp } from '../src/redis/scripts.js';
const cluster = connectCluster({ nodes: [{ host: '127.0.0.1', port: 7001 }] });
const scripts = new Scripts(cluster, 'luacost' + Date.now(), 3600);
async function stat(): Promise<number[]> {
  const out: number[] = [];
  for (const n of cluster.nodes('master')) {
    const s = (await n.info('commandstats')) as string;
    const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(s);
    out.push(Number(m?.[1] ?? 0), Number(m?.[2] ?? 0));
  }
  return out;
}
for (const n of [1, 2, 4, 8, 16, 32, 64]) {
  const shard = { couponId: 'lc' + n, index: 0, tag: `lc${n}-${Date.now()}#0.0` };
  await scripts.shardInit(shard, 1_000_000, 0);
  const calls = Math.ceil(20000 / n);
  let id = 0;
  const before = await stat();
  for (let c = 0; c < calls; c++) {
    const ops: BatchOp[] = [];
    for (let i = 0; i < n; i++) { id++; ops.push({ op: 'D', input: { requestId: `req-${n}-${id}-abcdefgh`, userId: `user-${id}`, quantity: 1, perUserLimit: 0 } }); }
    await scripts.shardBatch(shard, ops, true);
  }
  const after = await stat();
  let dc = 0, du = 0;
  for (let i = 0; i < after.length; i += 2) { dc += after[i]! - before[i]!; du += after[i + 1]! - before[i + 1]!; }
  console.log(`batch ${n}: ${dc} calls, ${(du / dc).toFixed(1)} us/call, ${(du / dc / n).toFixed(1)} us/request`);
}
cluster.disconnect();
