// Whether a gRPC target stays on this machine: the one case where a bearer token may go in plaintext.
import { isIP } from 'node:net';

/** The host part of a grpc-js target: `host:port`, `[v6]:port`, `dns:host:port`, `dns:///host:port`,
 * `ipv4:a.b.c.d:port`, `ipv6:[v6]:port`; undefined for `unix:` targets. */
export function targetHost(target: string): string | undefined {
  if (/^unix(-abstract)?:/.test(target)) return undefined;
  let rest = target.replace(/^(dns|ipv4|ipv6):(\/\/[^/]*\/)?/, '');
  rest = rest.split(',')[0]!;
  const bracket = /^\[([^\]]+)\]/.exec(rest);
  if (bracket) return bracket[1]!;
  // A bare IPv6 address has several colons and no port.
  if (isIP(rest) === 6) return rest;
  const colon = rest.lastIndexOf(':');
  return colon >= 0 ? rest.slice(0, colon) : rest;
}

/** 127.0.0.0/8, ::1, an IPv4-mapped loopback, `localhost`, or a unix socket. */
export function isLoopbackTarget(target: string): boolean {
  const host = targetHost(target)?.toLowerCase();
  if (host === undefined) return true;
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const v4 = host.replace(/^::ffff:/, '');
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return isIP(host) === 6 && /^(0*:)*:?0*1$/.test(host);
}
