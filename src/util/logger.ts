// Structured JSON logs (pino). One root logger per process, built from config and passed down.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'shardstock', pid: process.pid, ...base },
    redact: { paths: ['password', '*.password', 'authorization', '*.authorization', 'token', '*.token'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
