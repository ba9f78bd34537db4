// Bearer tokens and the role each one grants. Entries are `name:role:token` (the token is everything after
// the second colon), from SHARDSTOCK_AUTH_TOKENS and/or one per line in SHARDSTOCK_AUTH_TOKENS_FILE.
// Only SHA-256 digests are kept: a lookup compares digests, so its timing says nothing about a secret.
import { createHash } from 'node:crypto';

export const ROLES = ['deduct', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export interface TokenEntry {
  /** Who the token belongs to: the caller identity for rate limits and logs. */
  name: string;
  role: Role;
  /** hex SHA-256 of the token */
  digest: string;
}

export class TokenFormatError extends Error {
  override name = 'TokenFormatError';
}

export const digestToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/** Parses `name:role:token` entries; `where` names the source in error messages (never the token). */
export function parseTokenEntries(entries: string[], where: string): TokenEntry[] {
  return entries.map((raw, i) => {
    const a = raw.indexOf(':');
    const b = a < 0 ? -1 : raw.indexOf(':', a + 1);
    const name = raw.slice(0, a);
    const role = raw.slice(a + 1, b);
    const token = raw.slice(b + 1);
    if (a <= 0 || b < 0 || !/^[A-Za-z0-9._-]{1,64}$/.test(name)) {
      throw new TokenFormatError(`${where} entry ${i + 1}: expected name:role:token with a name of [A-Za-z0-9._-]`);
    }
    if (!(ROLES as readonly string[]).includes(role)) {
      throw new TokenFormatError(`${where} entry ${i + 1} (${name}): role must be one of ${ROLES.join(', ')}`);
    }
    if (token.length < 16) throw new TokenFormatError(`${where} entry ${i + 1} (${name}): token must be at least 16 characters`);
    if (isPlaceholder(token)) {
      throw new TokenFormatError(`${where} entry ${i + 1} (${name}): the token is a placeholder: generate one (openssl rand -hex 24)`);
    }
    return { name, role: role as Role, digest: digestToken(token) };
  });
}

/** Words that sample files put in place of a secret, and tokens made of one repeated character. */
const PLACEHOLDER = /replace|change-?me|placeholder|example|your[-_]?token|secret-?here|^(.)\1+$/i;

export function isPlaceholder(token: string): boolean {
  return PLACEHOLDER.test(token);
}

/** Lines of a tokens file: blank lines and `#` comments are skipped. */
export function tokenFileEntries(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

export class TokenRegistry {
  private readonly byDigest = new Map<string, TokenEntry>();

  constructor(entries: readonly TokenEntry[]) {
    for (const e of entries) {
      const clash = this.byDigest.get(e.digest);
      if (clash) throw new TokenFormatError(`tokens of ${clash.name} and ${e.name} are the same`);
      this.byDigest.set(e.digest, e);
    }
  }

  get size(): number {
    return this.byDigest.size;
  }

  lookup(token: string): TokenEntry | undefined {
    return this.byDigest.get(digestToken(token));
  }
}
