// gRPC's length-prefixed message frame (a 0 flag byte, a 4-byte big-endian length, the bytes), for tests that
// speak raw HTTP/2 so that they can send what a gRPC library never would: two messages, a body of another
// encoding, any header.
import { type DescMessage, type MessageShape, toBinary } from '@bufbuild/protobuf';

export function frame(body: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

/** `msg` encoded and framed. */
export function message<D extends DescMessage>(schema: D, msg: MessageShape<D>): Buffer {
  return frame(toBinary(schema, msg));
}
