// The debugging commands of docs/debugging.md, which the README's debugging section quotes, run as written
// with the real `buf curl` (Go, its own reflection client) and `curl` binaries against a real instance. Only
// the two ports and the coupon id are swapped for this run's, so a command that stops working fails here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createRegistry, fromJson, type DescService } from '@bufbuild/protobuf';
import { DeductOutcome } from '../src/gen/inventory/v1/inventory_pb.js';
import { SERVED_FILES } from '../src/transport/reflection.js';
import { jsonDocuments, section, shellCommands, type DocCommand } from './support/doc-commands.js';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DOC = readFileSync(`${ROOT}/docs/debugging.md`, 'utf8');
const README = readFileSync(`${ROOT}/README.md`, 'utf8');
const README_SECTION = '### Debugging: buf curl, grpcurl, curl';
const TOTAL = 100_000;

const registry = createRegistry(...SERVED_FILES);
const services: DescService[] = SERVED_FILES.flatMap((f) => f.services);
const serviceNames = services.map((s) => s.typeName).sort();
const methodNames = services.flatMap((s) => s.methods.map((m) => `${s.typeName}/${m.name}`)).sort();

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one command through bash in the repo root; `until` may end it early (the process group is killed). */
function run(command: string, opts: { timeoutMs?: number; until?: (stdout: string) => boolean } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    const stop = () => {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(stop, opts.timeoutMs ?? 30_000);
    child.stdout!.on('data', (d) => {
      stdout += d;
      if (opts.until?.(stdout)) stop();
    });
    child.stderr!.on('data', (d) => (stderr += d));
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let t: TestApp;
let coupon: string;
/** A documented command with this run's ports and coupon. */
let local: (command: string) => string;

beforeAll(async () => {
  t = await startTestApp();
  coupon = uniqueId('dbg');
  const http = t.httpUrl.replace('http://', '');
  local = (c) => c.replaceAll('127.0.0.1:50051', t.grpcAddr).replaceAll('127.0.0.1:8080', http).replaceAll('spring-sale', coupon);
});
afterAll(async () => {
  await t?.close();
});

async function ok(command: string): Promise<string> {
  const r = await run(local(command));
  expect(r.code, `${command}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

/** Protobuf JSON as buf curl and curl print it. */
// biome-ignore lint/suspicious/noExplicitAny: the shape is what the assertions check
const json = (out: string) => JSON.parse(out) as any;

interface Level {
  couponId: string;
  totalStock: string;
  available: string;
  deducted?: string;
}
interface FileProto {
  name: string;
  dependency?: string[];
}

describe('docs/debugging.md', () => {
  const commands = shellCommands(DOC);
  const runnable = commands.filter((c) => !c.flat.startsWith('grpcurl '));
  const grpcurl = commands.filter((c) => c.flat.startsWith('grpcurl '));

  it('when every buf curl and curl command runs as written, then each answers what the document says', { timeout: 240_000 }, async () => {
    let deducted = 0;
    const expectLevel = (level: Level | undefined) => {
      expect(level).toMatchObject({ couponId: coupon, totalStock: String(TOTAL), available: String(TOTAL - deducted) });
      expect(level?.deducted ?? '0').toBe(String(deducted));
    };
    // What each command must answer, chosen by what it calls; `seen` proves every kind is in the document.
    const checks: { kind: string; match: RegExp; check: (c: DocCommand) => Promise<void> }[] = [
      {
        kind: 'list services',
        match: /--list-services/,
        check: async (c) => expect((await ok(c.text)).trim().split('\n').sort()).toEqual(serviceNames),
      },
      {
        kind: 'list methods (reflection v1alpha)',
        match: /--reflect-protocol grpc-v1alpha --list-methods/,
        check: async (c) => expect((await ok(c.text)).trim().split('\n').sort()).toEqual(methodNames),
      },
      {
        kind: 'list methods',
        match: /--list-methods/,
        check: async (c) => expect((await ok(c.text)).trim().split('\n').sort()).toEqual(methodNames),
      },
      {
        kind: 'describe',
        match: /--schema docs\/describe .*ServerReflectionInfo/,
        check: async (c) => {
          const res = json(await ok(c.text));
          const symbol = res.originalRequest.fileContainingSymbol as string;
          const files: FileProto[] = res.fileDescriptorResponse.fileDescriptorProto;
          const desc = registry.get(symbol);
          expect(desc, `${symbol} is not served`).toBeDefined();
          expect(files[0]!.name).toBe(desc!.file.proto.name);
          // Every import is in the answer, so the reader sees a complete schema.
          const names = files.map((f) => f.name);
          for (const f of files) for (const dep of f.dependency ?? []) expect(names).toContain(dep);
        },
      },
      {
        kind: 'health check',
        match: /grpc\.health\.v1\.Health\/Check/,
        check: async (c) => expect(json(await ok(c.text))).toEqual({ status: 'SERVING' }),
      },
      {
        kind: 'CreateCoupon',
        match: /\/CreateCoupon$/,
        check: async (c) => {
          const res = json(await ok(c.text));
          expect(res).toMatchObject({ created: true, coupon: { couponId: coupon, totalStock: String(TOTAL), shardCount: 16 } });
        },
      },
      {
        kind: 'Deduct (gRPC, reflection)',
        match: /^npx buf curl --protocol grpc .*\/Deduct$/,
        check: async (c) => {
          expect(json(await ok(c.text))).toMatchObject({ outcome: 'DEDUCT_OUTCOME_DEDUCTED' });
          deducted++;
        },
      },
      {
        kind: 'Deduct (curl, Connect JSON)',
        match: /^curl .*\/Deduct$/,
        check: async (c) => {
          expect(json(await ok(c.text))).toMatchObject({ outcome: 'DEDUCT_OUTCOME_DEDUCTED' });
          deducted++;
        },
      },
      {
        kind: 'GetStock (gRPC, reflection)',
        match: /^npx buf curl --protocol grpc .*:50051\/inventory\.v1\.InventoryService\/GetStock$/,
        check: async (c) => expectLevel(json(await ok(c.text)).level),
      },
      {
        kind: 'GetStock (Connect, --schema proto)',
        match: /^npx buf curl --schema proto -d .*:8080\/inventory\.v1\.InventoryService\/GetStock$/,
        check: async (c) => expectLevel(json(await ok(c.text)).level),
      },
      {
        kind: 'GetStock (gRPC-Web, --schema proto)',
        match: /^npx buf curl --schema proto --protocol grpcweb .*:8080\/inventory\.v1\.InventoryService\/GetStock$/,
        check: async (c) => expectLevel(json(await ok(c.text)).level),
      },
      {
        kind: 'GetStock (curl, Connect JSON)',
        match: /^curl .*\/GetStock/,
        check: async (c) => expectLevel(json(await ok(c.text)).level),
      },
      {
        kind: 'WatchStock stream',
        match: /\/WatchStock$/,
        check: async (c) => {
          // The stream never ends by itself: read the current level, cause one change, read it, stop.
          let change: Promise<unknown> | undefined;
          const r = await run(local(c.text), {
            timeoutMs: 30_000,
            until: (out) => {
              const n = jsonDocuments(out).docs.length;
              if (n >= 1) change ??= t.client.deduct({ couponId: coupon, requestId: uniqueId('watch'), userId: 'u-watch', quantity: 1n });
              return n >= 2;
            },
          });
          expect(await change).toMatchObject({ outcome: DeductOutcome.DEDUCTED });
          const levels = (jsonDocuments(r.stdout).docs as { level: Level }[]).map((d) => d.level);
          expect(levels.length, r.stderr).toBeGreaterThanOrEqual(2);
          expectLevel(levels[0]);
          deducted++;
          expectLevel(levels[1]);
        },
      },
      {
        kind: 'readyz',
        match: /\/readyz$/,
        check: async (c) => expect(json(await ok(c.text))).toMatchObject({ ready: true }),
      },
    ];

    const seen = new Set<string>();
    for (const c of runnable) {
      const found = checks.find((k) => k.match.test(c.flat));
      expect(found, `no check for: ${c.flat}`).toBeDefined();
      await found!.check(c);
      seen.add(found!.kind);
    }
    expect([...seen].sort()).toEqual(checks.map((k) => k.kind).sort());
  });

  it('when the grpcurl commands are read, then each names a served service, method or message and its JSON fits the request', () => {
    expect(grpcurl.length).toBeGreaterThan(0);
    for (const c of grpcurl) {
      const words = c.flat.match(/'[^']*'|\S+/g)!;
      expect(words.slice(0, 2), c.flat).toEqual(['grpcurl', '-plaintext']);
      const at = words.indexOf('127.0.0.1:50051');
      expect(at, c.flat).toBeGreaterThan(0);
      const verb = words.slice(at + 1);
      if (words[2] === '-d') {
        expect(verb.length, c.flat).toBe(1);
        const [service, method] = verb[0]!.split('/');
        const m = services.find((s) => s.typeName === service)?.methods.find((x) => x.name === method);
        expect(m, `${verb[0]} is not served`).toBeDefined();
        expect(() => fromJson(m!.input, JSON.parse(words[3]!.slice(1, -1))), c.flat).not.toThrow();
      } else if (verb[0] === 'list') {
        if (verb[1] !== undefined) expect(serviceNames).toContain(verb[1]);
      } else {
        expect(verb[0], c.flat).toBe('describe');
        expect(registry.get(verb[1]!), `${verb[1]} is not served`).toBeDefined();
      }
    }
  });

  it('when each listed service is described through reflection, then its file has its canonical name and every import is served', {
    timeout: 60_000,
  }, async () => {
    // Not a documented command: the buf binary itself, which skips the start-up of npx.
    const reflect = async (request: object): Promise<FileProto[]> =>
      json(
        await ok(
          `node_modules/.bin/buf curl --schema docs/describe --protocol grpc --http2-prior-knowledge -d '${JSON.stringify(request)}' ` +
            'http://127.0.0.1:50051/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
        ),
      ).fileDescriptorResponse.fileDescriptorProto;
    const canonical: Record<string, string> = {
      'inventory.v1.InventoryService': 'inventory/v1/inventory.proto',
      'grpc.health.v1.Health': 'grpc/health/v1/health.proto',
      'grpc.reflection.v1.ServerReflection': 'grpc/reflection/v1/reflection.proto',
      'grpc.reflection.v1alpha.ServerReflection': 'grpc/reflection/v1alpha/reflection.proto',
    };
    expect(serviceNames).toEqual(Object.keys(canonical).sort());
    const imports = new Set<string>();
    for (const service of serviceNames) {
      const files = await reflect({ fileContainingSymbol: service });
      expect(files[0]!.name).toBe(canonical[service]);
      for (const f of files) for (const dep of f.dependency ?? []) imports.add(dep);
    }
    expect([...imports]).toEqual(['google/protobuf/timestamp.proto']);
    for (const dep of imports) expect((await reflect({ fileByFilename: dep }))[0]!.name).toBe(dep);
  });
});

describe('README debugging section', () => {
  it('when its commands are read, then each is one docs/debugging.md has (so the test above runs it)', () => {
    const text = section(README, README_SECTION);
    expect(text).toContain('docs/debugging.md');
    const shown = shellCommands(text);
    expect(shown.length).toBeGreaterThan(0);
    const documented = new Set(shellCommands(DOC).map((c) => c.flat));
    for (const c of shown) expect(documented.has(c.flat), `README command not in docs/debugging.md: ${c.flat}`).toBe(true);
  });
});
