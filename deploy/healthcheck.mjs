// Docker HEALTHCHECK: exit 0 when this instance's /readyz answers 200 (Redis, NATS and MySQL reachable), 1
// otherwise. Plain JS on built-in fetch: no dependency is loaded for a probe that runs every few seconds.
const addr = process.env.SHARDSTOCK_HTTP_ADDR || '127.0.0.1:8080';
const port = addr.slice(addr.lastIndexOf(':') + 1);
const host = addr.slice(0, addr.lastIndexOf(':')).replace(/^(0\.0\.0\.0|\[::\]|::)$/, '127.0.0.1') || '127.0.0.1';
try {
  const res = await fetch(`http://${host}:${port}/readyz`, { signal: AbortSignal.timeout(2500) });
  if (!res.ok) console.error(`readyz ${res.status}: ${(await res.text()).slice(0, 300)}`);
  process.exit(res.ok ? 0 : 1);
} catch (err) {
  console.error(`readyz unreachable: ${err?.message ?? err}`);
  process.exit(1);
}
