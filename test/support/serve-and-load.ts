// A separate OS process that runs the real Deduct path (DeductService on the shared namespace) with heavy
// fallback traffic and prints "tick" lines as it goes, so a test can SIGKILL it in the middle of moves.
import { loadConfig } from '../../src/config.js';
import { startApp } from '../../src/app/app.js';
import { createLogger } from '../../src/util/logger.js';

const args = JSON.parse(process.argv[2]!) as { namespace: string; couponId: string; count: number };
const config = loadConfig({
  SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
  SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
  SHARDSTOCK_MYSQL_URL: 'mysql://root@127.0.0.1:3306/shardstock_test',
  SHARDSTOCK_NAMESPACE: args.namespace,
  SHARDSTOCK_WORKERS: 'none',
  SHARDSTOCK_LOG_LEVEL: 'silent',
});
const app = await startApp(config, createLogger('silent'));
let done = 0;
let next = 0;
// Every request routes to a home shard by request id; quantity 3 on a coupon draining fast makes homes run
// dry often, so many calls go through move-out / credit / ack.
async function worker() {
  while (next < args.count) {
    const i = next++;
    await app.deduct.deduct({ couponId: args.couponId, requestId: `kill-${i}`, userId: '', quantity: 3n }).catch(() => {});
    if (++done % 200 === 0) process.stdout.write('tick\n');
  }
}
await Promise.all(Array.from({ length: 200 }, worker));
process.stdout.write('finished\n');
