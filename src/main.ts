// `npm start` / `npm run serve`: one service instance, configured from the environment.
import { TokenRegistry } from './access/tokens.js';
import { authTokens, type Config, ConfigError, loadConfig } from './config.js';
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

// SIGHUP: re-read the tokens (SHARDSTOCK_AUTH_TOKENS_FILE, rewritten by a secret mount) without a restart.
// A file that does not parse changes nothing: the current tokens stay.
process.on('SIGHUP', () => {
  if (config.auth !== 'token') return;
  try {
    const entries = authTokens(process.env);
    if (entries.length === 0) throw new ConfigError('no tokens left');
    app.gate.replaceTokens(new TokenRegistry(entries));
    log.info({ tokens: entries.map((e) => `${e.name}:${e.role}`) }, 'tokens reloaded');
  } catch (err) {
    log.error({ err: (err as Error).message }, 'tokens not reloaded: the current ones stay');
  }
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
