// A separate OS process (a service instance of its own) that makes holds on a coupon and prints a JSON line of
// what it got, then either exits or, with `stay`, stays up until killed — so a test can SIGKILL the instance
// that made the holds before they expire.
import { loadConfig } from '../../src/config.js';
import { startApp } from '../../src/app/app.js';
import { createLogger } from '../../src/util/logger.js';

const args = JSON.parse(process.argv[2]!) as {
  namespace: string;
  couponId: string;
  count: number;
  prefix: string;
  ttlMs: number;
  stay?: boolean;
};
const config = loadConfig({
  SHARDSTOCK_GRPC_ADDR: '127.0.0.1:0',
  SHARDSTOCK_HTTP_ADDR: '127.0.0.1:0',
  SHARDSTOCK_MYSQL_URL: 'mysql://root@127.0.0.1:3306/shardstock_test',
  SHARDSTOCK_NAMESPACE: args.namespace,
  SHARDSTOCK_WORKERS: 'none',
  SHARDSTOCK_LOG_LEVEL: 'silent',
  SHARDSTOCK_HOLD_TTL_MIN_MS: '100',
});
const app = await startApp(config, createLogger('silent'));
let held = 0;
let refused = 0;
let failed = 0;
const errors = new Set<string>();
let next = 0;
async function worker() {
  while (next < args.count) {
    const i = next++;
    // Contention on the last units may answer ABORTED / UNAVAILABLE: retried with the same request id, as a
    // client does.
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await app.holds.reserve({
          couponId: args.couponId,
          requestId: `${args.prefix}-${i}`,
          userId: '',
          quantity: 1n,
          ttlMs: args.ttlMs,
        });
        if (r.outcome === 'held') held++;
        else refused++;
        break;
      } catch (err) {
        const kind = (err as { kind?: string }).kind;
        if ((kind === 'aborted' || kind === 'unavailable') && attempt < 5) continue;
        errors.add(String(err));
        failed++;
        break;
      }
    }
  }
}
await Promise.all(Array.from({ length: 50 }, worker));
process.stdout.write(`${JSON.stringify({ held, refused, failed, errors: [...errors] })}\n`);
if (!args.stay) {
  await app.close();
  process.exit(0);
}
