// The error a gRPC call was refused with, or null when it succeeded, so a test can assert on a refusal's code
// and message without a try/catch around each call.
import type { ServiceError } from '@grpc/grpc-js';

export function rejection(p: Promise<unknown>): Promise<ServiceError | null> {
  return p.then(
    () => null,
    (e: ServiceError) => e,
  );
}
