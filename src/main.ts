// `npm start` / `npm run serve`: one service instance, configured from the environment.
import { type Config, ConfigError, loadConfig } from './config.js';
import { startApp } from './app/app.js';
import { createLogger } from './util/logger.js';

let config: Readonly<Config>;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`configuration error: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
const log = createLogger(config.logLevel, { instance: config.instanceId });
const app = await startApp(config, log).catch((err: unknown) => {
  log.fatal({ err }, 'could not start');
  process.exit(1);
});

let signals = 0;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (++signals > 1) process.exit(130);
    log.info({ signal: sig }, 'shutting down');
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}
