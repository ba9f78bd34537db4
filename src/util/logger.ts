// Structured JSON logs (pino). One root logger per process, built from config and passed down.
import { pino, type DestinationStream, type Logger } from 'pino';
import { redactError } from './redact.js';

export type { Logger };

/** Fields that may hold a secret wherever they appear one level down (a config, headers, a connection). */
const SECRET_FIELDS = ['password', 'authorization', 'token', 'mysqlUrl', 'redisPassword', 'authTokens', 'url'];

/** `destination`: where lines go (stdout by default; tests pass a capture stream). */
export function createLogger(level: string, base: Record<string, unknown> = {}, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'shardstock', pid: process.pid, ...base },
    redact: { paths: SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]), censor: '[redacted]' },
    // Errors are logged with URL credentials removed from message, stack and fields (err.input included).
    serializers: { err: redactError },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

/** How a background step (a sweep, an unawaited ack, a relay round) reports a failure: one warning line. */
export function backgroundErrors(log: Logger): (what: string, err: unknown) => void {
  return (what, err) => log.warn({ err: (err as Error)?.message, what }, 'background step failed');
}
