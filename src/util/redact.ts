// Credentials inside connection URLs (mysql://user:password@host, nats://token@host, redis://:pw@host) are
// replaced wherever text may reach a log or an answer: error messages, stacks, and the `input` a URL parse
// error carries (Node's ERR_INVALID_URL keeps the whole string it could not parse).
const USERINFO = /([a-z][a-z0-9+.-]*:\/\/)[^\s/@"'`]*@/gi;

export function redactUrls(text: string): string {
  return text.replace(USERINFO, '$1[redacted]@');
}

/** A copy of an error's loggable fields with credentials in URLs removed (pino's `err` serializer). */
export function redactError(err: unknown): unknown {
  if (!(err instanceof Error)) return typeof err === 'string' ? redactUrls(err) : err;
  const out: Record<string, unknown> = { type: err.name, message: redactUrls(err.message) };
  if (err.stack) out.stack = redactUrls(err.stack);
  for (const [k, v] of Object.entries(err)) {
    if (k === 'input' || k === 'url' || k === 'sql') out[k] = typeof v === 'string' ? redactUrls(v) : '[redacted]';
    else if (typeof v === 'string') out[k] = redactUrls(v);
    else if (k === 'cause') out[k] = redactError(v);
    else if (typeof v !== 'object' || v === null) out[k] = v;
  }
  if (err.cause !== undefined && out.cause === undefined) out.cause = redactError(err.cause);
  return out;
}
