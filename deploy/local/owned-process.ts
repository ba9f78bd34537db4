// Which process the stack may signal. A pidfile alone proves nothing: the server may have died and its pid been
// reused, or the file may name some other program. A pid counts as the stack's server for a port only when it
// is alive, its command line names the expected binary, and it holds the socket listening on that port.
// Everything is read from /proc, so a server that does not answer (SIGSTOPped, busy) is still recognised.
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

function readPidFile(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** The inodes of the sockets listening on `port` (IPv4 or IPv6, any address) in this network namespace. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(table)) continue;
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; field 9 is the socket's inode.
      if (f.length < 10 || f[3] !== '0A') continue;
      if (Number.parseInt(f[1]!.split(':')[1]!, 16) === port) inodes.add(f[9]!);
    }
  }
  return inodes;
}

function holdsSocket(pid: number, inodes: Set<string>): boolean {
  if (inodes.size === 0) return false;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false; // gone, or not ours to inspect
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m && inodes.has(m[1]!)) return true;
    } catch {
      // the fd closed while we looked
    }
  }
  return false;
}

function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return undefined;
  }
}

/** True when `pid` is a `binary` process that listens on `port`. */
export function isServerOn(pid: number, port: number, binary: string): boolean {
  const cmd = commandLine(pid);
  return cmd?.includes(binary) === true && holdsSocket(pid, listeningInodes(port));
}

/** The pid in `pidFile` when it is this port's `binary` server; undefined for a stale or foreign pid. */
export function ownedServerPid(pidFile: string, port: number, binary: string): number | undefined {
  const pid = readPidFile(pidFile);
  return pid !== undefined && isServerOn(pid, port, binary) ? pid : undefined;
}

/** Signals the port's server only when the pidfile really names it; says whether it did. */
export function signalOwnedServer(pidFile: string, port: number, binary: string, signal: NodeJS.Signals): boolean {
  const pid = ownedServerPid(pidFile, port, binary);
  if (pid === undefined) return false;
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false; // exited in between
  }
}
