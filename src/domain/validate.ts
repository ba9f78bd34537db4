// Input rules, shared by every use case so both transports refuse the same things with the same words.
import { invalid } from './errors.js';

const ID = /^[A-Za-z0-9._:-]+$/;
/** Ids end up in Redis key names, NATS subjects and MySQL columns: printable ASCII without separators
 * those systems treat specially ({}, spaces, *, >). */
export const COUPON_ID_MAX = 64;
export const REQUEST_ID_MAX = 128;
export const USER_ID_MAX = 128;
export const REASON_MAX = 256;
export const MAX_TOTAL_STOCK = 1_000_000_000_000n;
export const MAX_SHARDS = 1024;

export function id(field: string, value: string, max: number): string {
  if (value.length === 0) throw invalid(field, 'is required');
  if (value.length > max) throw invalid(field, `must be at most ${max} characters, got ${value.length}`);
  if (!ID.test(value)) throw invalid(field, 'may contain only letters, digits and . _ : -');
  return value;
}

export function optionalId(field: string, value: string, max: number): string | undefined {
  return value === '' ? undefined : id(field, value, max);
}

export const couponId = (v: string) => id('coupon_id', v, COUPON_ID_MAX);
export const requestId = (v: string) => id('request_id', v, REQUEST_ID_MAX);

export function units(field: string, value: bigint, min: bigint, max: bigint): number {
  if (value < min || value > max) throw invalid(field, `must be in ${min}..${max}, got ${value}`);
  return Number(value);
}

export function text(field: string, value: string, max: number): string {
  if (value.length > max) throw invalid(field, `must be at most ${max} characters, got ${value.length}`);
  // Control characters would end up in the ledger and in log lines.
  if (/[\u0000-\u001f\u007f]/.test(value)) throw invalid(field, 'must not contain control characters');
  return value;
}

/** Latest instant accepted for a timestamp field (9999-12-31T23:59:59Z). */
export const MAX_INSTANT_S = 253_402_300_799n;

/** A protobuf Timestamp as ms since epoch; null when unset. */
export function instant(field: string, value: { seconds: bigint; nanos: number } | undefined): number | null {
  if (value === undefined) return null;
  if (value.seconds < 0n || value.seconds > MAX_INSTANT_S)
    throw invalid(field, `must be between 1970-01-01 and 9999-12-31, got ${value.seconds} seconds`);
  if (!Number.isInteger(value.nanos) || value.nanos < 0 || value.nanos > 999_999_999)
    throw invalid(field, `nanos must be in 0..999999999, got ${value.nanos}`);
  return Number(value.seconds) * 1000 + Math.floor(value.nanos / 1_000_000);
}
