// Deadlines of 2^31 ms (about 24.8 days) or more, as a client sends them in `grpc-timeout` or
// `connect-timeout-ms`, are clamped to just under that before the protocol libraries read them. Both end in a
// Node timer, which holds at most 2^31 - 1 ms: grpc-js 1.14 reads the header as a 32-bit integer (a 30-day
// `720H` wraps to a deadline already past, and the call is refused DEADLINE_EXCEEDED), and connect-node hands
// it to setTimeout, which fires after 1 ms instead (a WatchStock stream then ends at once). A deadline that
// far out means "no hurry"; 24.8 days keeps that meaning.
/** The longest timer Node keeps, in ms. */
export const MAX_DEADLINE_MS = 2 ** 31 - 1;

const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
/** MAX_DEADLINE_MS in grpc-timeout's notation (whole seconds, at most 8 digits). */
const MAX_GRPC_TIMEOUT = `${Math.floor(MAX_DEADLINE_MS / 1000)}S`;

/** Rewrites, in place, a `grpc-timeout` or `connect-timeout-ms` header above MAX_DEADLINE_MS; anything else
 * (including malformed values, which the libraries refuse themselves) is left as it is. */
export function clampDeadlineHeaders(headers: Record<string, string | string[] | number | undefined>): void {
  const grpcTimeout = headers['grpc-timeout'];
  if (typeof grpcTimeout === 'string') {
    const m = GRPC_TIMEOUT.exec(grpcTimeout);
    if (m && Number(m[1]) * UNIT_MS[m[2]!]! > MAX_DEADLINE_MS) headers['grpc-timeout'] = MAX_GRPC_TIMEOUT;
  }
  const connectTimeout = headers['connect-timeout-ms'];
  if (typeof connectTimeout === 'string' && /^\d{1,10}$/.test(connectTimeout) && Number(connectTimeout) > MAX_DEADLINE_MS) {
    headers['connect-timeout-ms'] = String(MAX_DEADLINE_MS);
  }
}
