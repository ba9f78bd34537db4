// A separate OS process that places DeductOrders of several coupons through the real order path (its own app
// on the shared namespace) and prints "tick" as orders are answered, so a test can SIGKILL it mid-order.
import { loadConfig } from '../../src/config.js';
import { startApp } from '../../src/app/app.js';
import { createLogger } from '../../src/util/logger.js';

const args = JSON.parse(process.argv[2]!) as {
  namespace: string;
  items: { couponId: string; quantity: number }[];
  prefix: string;
  count: number;
  ttlMs: number;
  env: Record<string, string>;
  /** 'mixed': odd orders are ReserveOrders. Default: every order is a DeductOrder. */
  kinds?: 'deduct' | 'mixed';
};
const config = loadConfig({
  SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
  SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
  SHARDSTOCK_MYSQL_URL: 'mysql://root@127.0.0.1:3306/shardstock_test',
  SHARDSTOCK_NAMESPACE: args.namespace,
  SHARDSTOCK_WORKERS: 'none',
  SHARDSTOCK_LOG_LEVEL: 'silent',
  SHARDSTOCK_INSTANCE_ID: 'order-child',
  ...args.env,
});
const app = await startApp(config, createLogger('silent'));
const orders = app.orders;
let next = 0;
let done = 0;
process.stdout.write('ready\n');
async function worker() {
  while (next < args.count) {
    const i = next++;
    const place = args.kinds === 'mixed' && i % 2 === 1 ? orders.reserveOrder.bind(orders) : orders.deductOrder.bind(orders);
    await place({
      requestId: `${args.prefix}-${i}`,
      userId: `u${i}`,
      items: args.items.map((it) => ({ couponId: it.couponId, quantity: BigInt(it.quantity) })),
      ttlMs: args.ttlMs,
    }).catch(() => {});
    if (++done % 20 === 0) process.stdout.write('tick\n');
  }
}
await Promise.all(Array.from({ length: 50 }, worker));
process.stdout.write('finished\n');
