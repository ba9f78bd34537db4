// gRPC status codes, the one table of them in the project: the server's status mapping (transport/status.ts),
// the Connect port's parse-error rewrite, the client's retry policy and the CLI read their numbers and names
// here. The numbers are the same in @grpc/grpc-js `status` and @connectrpc/connect `Code`.
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

const NAMES: readonly string[] = Object.entries(GrpcCode).reduce<string[]>((names, [name, code]) => {
  names[code] = name;
  return names;
}, []);

/** `NOT_FOUND`; the number itself for a code this table does not know. */
export function statusName(code: number): string {
  return NAMES[code] ?? String(code);
}

/** `not_found`, as metrics outcome labels and logs show a status; `unknown` for a code not in the table. */
export function codeName(code: number): string {
  return NAMES[code]?.toLowerCase() ?? 'unknown';
}
