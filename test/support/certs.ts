// Throwaway certificates for TLS tests, made with openssl in a temp dir: a CA and leaf certificates it signs,
// valid for 127.0.0.1 and localhost.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface CertDir {
  dir: string;
  /** The path of `<name>.crt` / `<name>.key` in the dir. */
  file(name: string): string;
  /** A self-signed authority `<name>.crt` + `<name>.key`. */
  authority(name: string): void;
  /** A key and a certificate for `cn`, signed by authority `ca`. */
  issue(cn: string, ca: string): void;
  remove(): void;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function certDir(): CertDir {
  const dir = mkdtempSync(join(tmpdir(), 'shardstock-certs-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  return {
    dir,
    file: (name) => join(dir, name),
    authority(name) {
      openssl('req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '1', '-subj', `/CN=${name}`);
    },
    issue(cn, ca) {
      openssl('req', ...EC, '-keyout', `${cn}.key`, '-out', `${cn}.csr`, '-subj', `/CN=${cn}`);
      writeFileSync(join(dir, `${cn}.ext`), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
      openssl(
        'x509',
        '-req',
        '-in',
        `${cn}.csr`,
        '-CA',
        `${ca}.crt`,
        '-CAkey',
        `${ca}.key`,
        '-CAcreateserial',
        '-out',
        `${cn}.crt`,
        '-days',
        '1',
        '-extfile',
        `${cn}.ext`,
      );
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
