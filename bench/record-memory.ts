// Redis memory per idempotency record, measured with MEMORY USAGE (SAMPLES 0: every field counted) on one
// shard's record hash after N deductions (README "Memory"). Runs against the local stack's cluster:
//   npx tsx bench/record-memory.ts [--records 100000] [--ids uuid|bench] [--users none|short]
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.js';
import { connectCluster } from '../src/redis/cluster.js';
import { firstBucket } from '../src/redis/keys.js';
import { Scripts } from '../src/redis/scripts.js';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '100000' },
    ids: { type: 'string', default: 'uuid' },
    users: { type: 'string', default: 'none' },
  },
});
const n = Number(values.records);
const config = loadConfig();
const redis = connectCluster({ nodes: config.redisNodes });
const windowS = 86_400;
const scripts = new Scripts(redis, `memtest${process.pid}`, windowS);
const shard = { couponId: `mem${process.pid}`, index: 0, tag: `mem${process.pid}#0.0` };
const k = scripts.keys(shard);
try {
  await scripts.shardInit(shard, n * 2, 0);
  const requestId = (i: number) => (values.ids === 'uuid' ? randomUUID() : `b1r${String(i).padStart(10, '0')}`);
  const userId = (i: number) => (values.users === 'none' ? '' : `b1u${String(i).padStart(10, '0')}`);
  for (let i = 0; i < n; i += 2000) {
    await Promise.all(
      Array.from({ length: Math.min(2000, n - i) }, (_, j) =>
        scripts.deduct(shard, { requestId: requestId(i + j), userId: userId(i + j), quantity: 1, perUserLimit: 0 }, [], '', 1),
      ),
    );
  }
  const first = firstBucket(Date.now(), windowS);
  let bytes = 0;
  let fields = 0;
  for (let b = first; b < first + 3; b++) {
    bytes += Number((await redis.call('MEMORY', 'USAGE', k.records(b), 'SAMPLES', '0')) ?? 0);
    fields += await redis.hlen(k.records(b));
  }
  const sample = await redis.hrandfield(k.records(first + 1), 1, 'WITHVALUES');
  console.log(
    JSON.stringify({
      records: fields,
      ids: values.ids,
      users: values.users,
      bytes,
      bytesPerRecord: +(bytes / fields).toFixed(1),
      sample: sample?.[1],
    }),
  );
} finally {
  const first = firstBucket(Date.now(), windowS);
  await redis.del(k.shard, k.outbox, k.records(first), k.records(first + 1), k.records(first + 2));
  redis.disconnect();
}
