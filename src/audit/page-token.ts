// Page tokens of the audit lists: the id of the last row a page held (keyset pagination: the next page is
// `id > token`, stable while rows are added). Opaque to callers: base64url of "v1:<id>".
import { invalid } from '../domain/errors.js';

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

export function encodePageToken(lastId: number): string {
  return Buffer.from(`v1:${lastId}`).toString('base64url');
}

/** 0 for the first page; INVALID_ARGUMENT naming page_token for anything this server did not hand out. */
export function decodePageToken(token: string): number {
  if (token === '') return 0;
  const m = token.length <= 64 ? /^v1:(\d{1,15})$/.exec(Buffer.from(token, 'base64url').toString('latin1')) : null;
  if (!m || Buffer.from(token, 'base64url').toString('base64url') !== token)
    throw invalid('page_token', 'is not a token from a previous page of this list');
  return Number(m[1]);
}

export function pageSize(requested: number): number {
  if (requested === 0) return DEFAULT_PAGE_SIZE;
  if (requested < 1 || requested > MAX_PAGE_SIZE)
    throw invalid('page_size', `must be in 1..${MAX_PAGE_SIZE} (0 = ${DEFAULT_PAGE_SIZE}), got ${requested}`);
  return requested;
}
