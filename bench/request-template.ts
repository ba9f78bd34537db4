// Pre-encoded Deduct requests: the gRPC frame (5-byte prefix + protobuf-es `toBinary` output) is built once
// with fixed-width placeholders, and each request only copies it and writes its digits in place, so the load
// generator spends its CPU on the wire, not on encoding.
import { create, toBinary } from '@bufbuild/protobuf';
import { DeductRequestSchema } from '../src/gen/inventory/v1/inventory_pb.js';

/** Characters ids may never contain, so a placeholder cannot collide with a prefix. */
const COUPON_MARK = '#';
const REQUEST_MARK = '*';
const USER_MARK = '!';
export const SEQ_WIDTH = 10;

interface Slot {
  offset: number;
  width: number;
}

export interface TemplateSpec {
  couponPrefix: string;
  couponWidth: number;
  idPrefix: string;
  quantity: number;
}

export class DeductTemplate {
  private readonly frame: Buffer;
  private readonly coupon: Slot | undefined;
  private readonly request: Slot;
  private readonly user: Slot;

  constructor(spec: TemplateSpec) {
    const msg = create(DeductRequestSchema, {
      couponId: spec.couponPrefix + COUPON_MARK.repeat(spec.couponWidth),
      requestId: `${spec.idPrefix}r${REQUEST_MARK.repeat(SEQ_WIDTH)}`,
      userId: `${spec.idPrefix}u${USER_MARK.repeat(SEQ_WIDTH)}`,
      quantity: BigInt(spec.quantity),
    });
    const body = toBinary(DeductRequestSchema, msg);
    this.frame = Buffer.alloc(5 + body.length);
    this.frame.writeUInt32BE(body.length, 1);
    this.frame.set(body, 5);
    const find = (mark: string, width: number): Slot => {
      const offset = this.frame.indexOf(mark.repeat(width));
      if (offset < 0) throw new Error(`placeholder ${mark} not found in the encoded request`);
      return { offset, width };
    };
    this.coupon = spec.couponWidth > 0 ? find(COUPON_MARK, spec.couponWidth) : undefined;
    this.request = find(REQUEST_MARK, SEQ_WIDTH);
    this.user = find(USER_MARK, SEQ_WIDTH);
  }

  /** The whole gRPC message frame (length-prefixed) for request `seq` to coupon index `couponIndex`. */
  frameFor(seq: number, couponIndex: number): Buffer {
    const buf = Buffer.allocUnsafe(this.frame.length);
    this.frame.copy(buf);
    if (this.coupon) writeDigits(buf, this.coupon, couponIndex);
    writeDigits(buf, this.request, seq);
    writeDigits(buf, this.user, seq);
    return buf;
  }

  /** The protobuf message alone (for clients that add the frame themselves). */
  messageFor(seq: number, couponIndex: number): Buffer {
    return this.frameFor(seq, couponIndex).subarray(5);
  }
}

function writeDigits(buf: Buffer, slot: Slot, n: number): void {
  for (let i = slot.offset + slot.width - 1; i >= slot.offset; i--) {
    buf[i] = 48 + (n % 10);
    n = Math.floor(n / 10);
  }
}

export function padIndex(i: number, width: number): string {
  return width > 0 ? String(i).padStart(width, '0') : '';
}
