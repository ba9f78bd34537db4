// In a sold-out storm nearly every Deduct answers the same reply: SOLD_OUT from the request's home shard, nothing
// granted. Its message and bytes are made once per shard index and reused: building and encoding a message per
// refusal was a visible share of a refusal's CPU once the refusal itself came from memory. The message is frozen
// (every caller shares it) and carries its bytes, which the gRPC port sends as they are (grpc-server.ts); the
// Connect port encodes it as any other message.
import { create, toBinary } from '@bufbuild/protobuf';
import { DeductOutcome, type DeductResponse, DeductResponseSchema } from '../gen/inventory/v1/inventory_pb.js';

const ENCODED = Symbol('pre-encoded bytes');

/** The bytes a reply was encoded to when it was frozen, or undefined for an ordinary message. */
export function preEncoded(msg: unknown): Buffer | undefined {
  return (msg as { [ENCODED]?: Buffer } | null)?.[ENCODED];
}

export class SoldOutReplies {
  /** By shard index (at most 1024, validate.ts). */
  private readonly byShard: DeductResponse[] = [];

  reply(shard: number): DeductResponse {
    let msg = this.byShard[shard];
    if (!msg) {
      msg = create(DeductResponseSchema, { outcome: DeductOutcome.SOLD_OUT, shard });
      // Not enumerable: invisible to protobuf-es, JSON and equality checks.
      Object.defineProperty(msg, ENCODED, { value: Buffer.from(toBinary(DeductResponseSchema, msg)) });
      Object.freeze(msg);
      this.byShard[shard] = msg;
    }
    return msg;
  }
}
