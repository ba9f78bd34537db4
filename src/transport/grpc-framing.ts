// What grpc-js lets through or words badly about a call's framing on the gRPC port, put in the service's terms:
// - a content type other than gRPC with protobuf (`application/grpc+json`, `application/grpc-web`): grpc-js
//   takes any `application/grpc*` body as gRPC with protobuf, so a JSON body would be read as protobuf bytes.
//   gRPC with JSON and gRPC-Web are served on the HTTP port (connect-node); here the call is refused before any
//   handler runs.
// - a unary (or server-streaming) call with two request messages or none: grpc-js answers UNIMPLEMENTED (as
//   connect-node and connect-go do: such a call uses the method as a client-streaming one, which it is not), but
//   says "Received a second request message for server streaming method ..." for a unary method too. The text
//   is put in connect-node's words, so both ports say the same about the same call.
import { GrpcCode } from './status.js';

/** Set on a stream's headers (before grpc-js reads them) to the media type of a gRPC-like content type this
 * port does not serve; a client's own header of that name is dropped first. */
export const UNSERVED_CODEC = 'shardstock-unserved-codec';

/** What this port serves: application/grpc or application/grpc+proto, parameters allowed. */
const SERVED = /^application\/grpc(\+proto)?$/;

/** Marks, in place, headers whose content type starts with application/grpc (what grpc-js would take) but is
 * not one this port serves. Other content types are left to grpc-js, which answers them HTTP 415. */
export function markUnservedCodec(headers: Record<string, string | string[] | number | undefined>): void {
  delete headers[UNSERVED_CODEC];
  const ct = headers['content-type'];
  if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) return;
  const media = ct.split(';', 1)[0]!.trim().toLowerCase();
  if (!SERVED.test(media)) headers[UNSERVED_CODEC] = media;
}

/** The refusal of a call marked by markUnservedCodec. */
export function unservedCodecStatus(media: string): { code: number; details: string } {
  return {
    code: GrpcCode.INVALID_ARGUMENT,
    details:
      `content-type: ${media} is not served on the gRPC port, which takes gRPC with protobuf only ` +
      '(application/grpc, application/grpc+proto); gRPC with JSON, gRPC-Web and Connect are served on the HTTP port',
  };
}

const SECOND_MESSAGE = 'Received a second request message for ';
const NO_MESSAGE = 'Received no request message for ';

/** grpc-js's own status for a request with the wrong number of messages, in connect-node's words for the
 * method's kind; any other status as it is. */
export function framingStatus<S extends { code: number; details: string }>(status: S, kind: 'unary' | 'server-streaming'): S {
  if (status.code !== GrpcCode.UNIMPLEMENTED) return status;
  if (status.details.startsWith(SECOND_MESSAGE))
    return { ...status, details: `protocol error: received extra input message for ${kind} method` };
  if (status.details.startsWith(NO_MESSAGE)) return { ...status, details: `protocol error: missing input message for ${kind} method` };
  return status;
}
