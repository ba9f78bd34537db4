// What can be checked of deploy/ without Docker or Kubernetes: the manifests parse, every environment variable
// they set is a setting of src/config.ts and every setting is in the Kubernetes ConfigMap/Secret, the values
// load through loadConfig, ports and probe names agree with the code, graceful termination covers the drain
// time, the NATS definitions match the settlement code (and a real nats-server accepts them next to
// ensureSettlementStream), and the installed redis-server accepts redis.conf.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectNats, nanos } from 'nats';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  configRows,
  DOCUMENTS_WITH_TABLE,
  documentedSettings,
  literalNamesInCode,
  markdownTable,
  refusedNames,
  TABLE_END,
  TABLE_START,
  varsReadByLoadConfig,
  withTable,
} from '../deploy/config-reference.js';
import { loadConfig } from '../src/config.js';
import { InventoryService } from '../src/gen/inventory/v1/inventory_pb.js';
import { ACK_WAIT_MS, DUPLICATE_WINDOW_MS, ensureSettlementStream, settlementNames } from '../src/settlement/jetstream.js';
import { LIVENESS_SERVICE } from '../src/transport/grpc-server.js';

const ROOT = new URL('..', import.meta.url).pathname;
const DEPLOY = join(ROOT, 'deploy');
const read = (rel: string) => readFileSync(join(ROOT, rel), 'utf8');

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML, whose fields the assertions walk
type Doc = Record<string, any>;

function yamlDocs(rel: string): Doc[] {
  const docs = parseAllDocuments(read(rel), { merge: true });
  for (const d of docs) expect(d.errors, `${rel}: ${d.errors.join('; ')}`).toEqual([]);
  return docs.map((d) => d.toJS({ maxAliasCount: 1000 }) as Doc).filter(Boolean);
}

const k8s = Object.fromEntries(
  ['configmap', 'secret', 'deployment', 'service', 'hpa', 'pdb', 'nats-setup', 'kustomization'].map((n) => [
    n,
    yamlDocs(`deploy/k8s/${n}.yaml`),
  ]),
);
const compose = yamlDocs('deploy/docker-compose.yml')[0]!;
const configMap = k8s.configmap![0]!.data as Record<string, string>;
const secret = k8s.secret![0]!.stringData as Record<string, string>;
const deployment = k8s.deployment![0]!;
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const settings = documentedSettings();
const defaults = loadConfig({});
const portOf = (addr: string) => Number(addr.slice(addr.lastIndexOf(':') + 1));
const shardstockServices = Object.entries(compose.services as Record<string, Doc>).filter(([, s]) =>
  String(s.image ?? '').startsWith('shardstock'),
);

describe('deploy manifests: YAML and files', () => {
  it('when every YAML file under deploy/ is parsed, then none has an error', () => {
    const files = readdirSync(DEPLOY, { recursive: true, encoding: 'utf8' }).filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThanOrEqual(9);
    for (const f of files) yamlDocs(`deploy/${f}`);
    expect(Object.keys(compose.services)).toEqual(
      expect.arrayContaining(['redis-1', 'redis-6', 'redis-cluster-init', 'nats-1', 'nats-3', 'nats-init', 'mysql']),
    );
    expect(shardstockServices).toHaveLength(2);
  });

  it('when the kustomization lists its resources, then each file exists', () => {
    for (const r of k8s.kustomization![0]!.resources as string[]) expect(existsSync(join(DEPLOY, 'k8s', r)), r).toBe(true);
  });

  it('when the Dockerfile copies files, then they exist, and it runs the build output as a non-root user', () => {
    const dockerfile = read('deploy/Dockerfile');
    for (const m of dockerfile.matchAll(/^COPY (?!--from)(?:--\S+ )*(.+) \S+$/gm)) {
      for (const src of m[1]!.split(/\s+/)) expect(existsSync(join(ROOT, src)), `COPY ${src}`).toBe(true);
    }
    expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\} AS runtime$/m);
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-slim$/m);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^CMD \["node", "dist\/src\/main\.js"\]$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK .*deploy\/healthcheck\.mjs/m);
    // dist/src/main.js is what `npm run build` makes of src/main.ts.
    expect(existsSync(join(ROOT, 'src/main.ts'))).toBe(true);
    expect(JSON.parse(read('package.json')).scripts.build).toContain('tsconfig.build.json');
  });
});

describe('deploy manifests: environment variables against src/config.ts', () => {
  it('when config.ts is read, then every variable loadConfig reads is documented and every documented one is read', () => {
    const readVars = varsReadByLoadConfig();
    const refused = refusedNames();
    expect([...readVars].filter((v) => !settings.has(v) && !refused.has(v))).toEqual([]);
    expect([...settings].filter((v) => !readVars.has(v))).toEqual([]);
    // Names in code that only some branch reads (or prefixes such as SHARDSTOCK_GRPC_TLS + _CERT).
    const undocumented = [...literalNamesInCode()].filter(
      (n) => !settings.has(n) && !refused.has(n) && ![...settings].some((s) => s.startsWith(`${n}_`)),
    );
    expect(undocumented).toEqual([]);
    expect(settings.size).toBeGreaterThanOrEqual(27);
  });

  it('when the manifests set SHARDSTOCK_* variables, then each one is a setting of config.ts', () => {
    const used = new Map<string, string>();
    const note = (where: string, names: Iterable<string>) => {
      for (const n of names) if (n.startsWith('SHARDSTOCK_')) used.set(`${where}: ${n}`, n);
    };
    note('configmap', Object.keys(configMap));
    note('secret', Object.keys(secret));
    note(
      'deployment',
      (container.env as { name: string }[]).map((e) => e.name),
    );
    for (const [name, s] of shardstockServices) note(`compose ${name}`, Object.keys(s.environment));
    note(
      'Dockerfile',
      [...read('deploy/Dockerfile').matchAll(/\b(SHARDSTOCK_[A-Z0-9_]+)=/g)].map((m) => m[1]!),
    );
    for (const f of ['docker-compose.yml', 'k8s/configmap.yaml', 'k8s/deployment.yaml', 'k8s/secret.yaml']) {
      note(
        f,
        [...read(`deploy/${f}`).matchAll(/^\s*-?\s*(?:name:\s*)?(SHARDSTOCK_[A-Z0-9_]+)\s*:/gm)].map((m) => m[1]!),
      );
    }
    expect(used.size).toBeGreaterThan(40);
    expect([...used].filter(([, n]) => !settings.has(n)).map(([where]) => where)).toEqual([]);
  });

  it('when the ConfigMap, Secret and Deployment env are put together, then every setting is there, secrets only in the Secret', () => {
    const fromDeployment = (container.env as { name: string }[]).map((e) => e.name);
    const covered = new Set([...Object.keys(configMap), ...Object.keys(secret), ...fromDeployment]);
    expect([...settings].filter((s) => !covered.has(s))).toEqual([]);
    for (const s of ['SHARDSTOCK_REDIS_PASSWORD', 'SHARDSTOCK_MYSQL_URL', 'SHARDSTOCK_AUTH_TOKENS']) {
      expect(secret).toHaveProperty(s);
      expect(configMap).not.toHaveProperty(s);
    }
    // Consumer-group names must differ per pod: the pod name, never a shared ConfigMap value.
    expect(configMap).not.toHaveProperty('SHARDSTOCK_INSTANCE_ID');
    expect(container.env).toContainEqual({ name: 'SHARDSTOCK_INSTANCE_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } });
    expect(container.envFrom).toEqual([
      { configMapRef: { name: k8s.configmap![0]!.metadata.name } },
      { secretRef: { name: k8s.secret![0]!.metadata.name } },
    ]);
  });

  it('when the Kubernetes and compose values are loaded by loadConfig, then they are valid and listen on all interfaces', () => {
    // The Secret ships placeholder tokens: the service refuses them until real ones are put in.
    expect(() => loadConfig({ ...configMap, ...secret })).toThrow(/placeholder/);
    const tokens = 'ops:admin:8f3a1c9e4b7d2f6a0e5c8b1d4a7f3e9c,shop:deduct:2b6e9f1a4c8d3e7b0a5f9c2e6d1b4a8f';
    const k = loadConfig({ ...configMap, ...secret, SHARDSTOCK_AUTH_TOKENS: tokens, SHARDSTOCK_INSTANCE_ID: 'shardstock-abc' });
    expect(k).toMatchObject({
      grpcAddr: '0.0.0.0:50051',
      httpAddr: '0.0.0.0:8080',
      ackLevel: 'replica',
      auth: 'token',
      namespace: 'shardstock',
      failoverFence: true,
    });
    expect(k.redisNodes).toHaveLength(3);
    expect(k.workers).toEqual(new Set(['relay', 'settle', 'sweep', 'reconcile']));
    const ids = new Set<string>();
    for (const [, s] of shardstockServices) {
      const c = loadConfig(s.environment);
      expect(c.grpcAddr.startsWith('0.0.0.0:')).toBe(true);
      expect(c.redisNodes.map((n) => n.host)).toEqual(['redis-1', 'redis-2', 'redis-3']);
      expect(c.natsUrl.split(',')).toHaveLength(3);
      ids.add(c.instanceId);
    }
    expect(ids.size).toBe(2);
  });
});

describe('deploy manifests: ports, probes, termination', () => {
  const grpcPort = portOf(defaults.grpcAddr);
  const httpPort = portOf(defaults.httpAddr);

  it('when ports are declared anywhere, then they agree with the config defaults (gRPC 50051, HTTP 8080)', () => {
    expect([grpcPort, httpPort]).toEqual([50051, 8080]);
    const dockerfile = read('deploy/Dockerfile');
    expect(/^EXPOSE (.+)$/m.exec(dockerfile)![1]!.split(/\s+/).map(Number).sort()).toEqual([grpcPort, httpPort].sort());
    expect(dockerfile).toContain(`SHARDSTOCK_GRPC_ADDR=0.0.0.0:${grpcPort}`);
    expect(dockerfile).toContain(`SHARDSTOCK_HTTP_ADDR=0.0.0.0:${httpPort}`);

    for (const [name, s] of shardstockServices) {
      const targets = (s.ports as string[]).map((p) => Number(p.split(':').at(-1)));
      expect(targets, name).toEqual([portOf(s.environment.SHARDSTOCK_GRPC_ADDR), portOf(s.environment.SHARDSTOCK_HTTP_ADDR)]);
      expect(targets, name).toEqual([grpcPort, httpPort]);
    }
    const published = shardstockServices.flatMap(([, s]) => (s.ports as string[]).map((p) => p.split(':').at(-2)));
    expect(new Set(published).size).toBe(published.length);
    // Published on loopback only: compose runs with auth off.
    for (const [name, s] of shardstockServices) for (const p of s.ports as string[]) expect(p, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);

    const containerPorts = Object.fromEntries(
      (container.ports as { name: string; containerPort: number }[]).map((p) => [p.name, p.containerPort]),
    );
    expect(containerPorts).toEqual({ grpc: portOf(configMap.SHARDSTOCK_GRPC_ADDR!), http: portOf(configMap.SHARDSTOCK_HTTP_ADDR!) });
    expect(containerPorts).toEqual({ grpc: grpcPort, http: httpPort });
    for (const svc of k8s.service!) {
      for (const p of svc.spec.ports as { name: string; port: number; targetPort: string }[]) {
        expect(containerPorts[p.targetPort], `${svc.metadata.name} ${p.name}`).toBe(p.port);
      }
    }
    expect(Number(deployment.spec.template.metadata.annotations['prometheus.io/port'])).toBe(httpPort);
  });

  it('when Kubernetes probes the pod, then it asks the plaintext HTTP port (so gRPC TLS cannot break probes): readiness /readyz, liveness and startup /healthz', () => {
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      expect(container[probe].grpc, probe).toBeUndefined();
      expect(container[probe].httpGet.port, probe).toBe('http');
    }
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    expect(container.startupProbe.httpGet.path).toBe('/healthz');
    // The gRPC health names stay for probes that speak gRPC (a mesh sidecar, grpc-health-probe with TLS).
    expect([InventoryService.typeName, LIVENESS_SERVICE]).toEqual(['inventory.v1.InventoryService', 'liveness']);
  });

  it('when a pod is terminated, then the grace period covers preStop + SHARDSTOCK_SHUTDOWN_GRACE_MS + a margin', () => {
    const preStop = container.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    const preStopMs = Number(preStop[1]) * 1000;
    const graceMs = Number(configMap.SHARDSTOCK_SHUTDOWN_GRACE_MS);
    expect(graceMs).toBe(loadConfig({ ...configMap, ...secret, SHARDSTOCK_AUTH: 'off', SHARDSTOCK_AUTH_TOKENS: '' }).shutdownGraceMs);
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThanOrEqual(preStopMs + graceMs + 5000);
    for (const [name, s] of shardstockServices) {
      const stop = Number(/^(\d+)s$/.exec(s.stop_grace_period)![1]) * 1000;
      expect(stop, name).toBeGreaterThanOrEqual(loadConfig(s.environment).shutdownGraceMs + 5000);
    }
  });

  it('when the HPA and PDB are read, then they target the Deployment and keep capacity during disruptions', () => {
    const hpa = k8s.hpa![0]!;
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    const pdb = k8s.pdb![0]!;
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(pdb.spec.maxUnavailable).toBeLessThan(hpa.spec.minReplicas);
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
  });
});

describe('deploy/nats and deploy/redis against the code and real servers', () => {
  const stream = JSON.parse(read('deploy/nats/stream.json'));
  const consumer = JSON.parse(read('deploy/nats/consumer.json'));
  const names = settlementNames('shardstock');
  const cleanups: (() => void)[] = [];
  afterAll(() => {
    for (const c of cleanups) c();
  });

  it("when the stream and consumer files are read, then their names and settings are the settlement code's", () => {
    expect(stream).toMatchObject({
      name: names.stream,
      subjects: [`${names.subjectPrefix}.>`],
      retention: 'workqueue',
      storage: 'file',
      num_replicas: 3,
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    });
    expect(consumer).toMatchObject({ durable_name: names.durable, ack_policy: 'explicit', ack_wait: nanos(ACK_WAIT_MS), max_deliver: -1 });
    const [defs] = k8s['nats-setup']!;
    expect(JSON.parse(defs!.data['stream.json'])).toEqual(stream);
    expect(JSON.parse(defs!.data['consumer.json'])).toEqual(consumer);
    const init = (compose.services['nats-init'].command as string[]).join('\n');
    expect(init).toContain(`stream info ${names.stream}`);
    expect(init).toContain(`consumer info ${names.stream} ${names.durable}`);
  });

  it("when a nats-server gets the files and then the service ensures its stream, then the files' settings survive", async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'shardstock-nats-'));
    const server = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    cleanups.push(() => stop(server, dir));
    const nc = await retry(() => connectNats({ servers: `127.0.0.1:${port}` }));
    try {
      const jsm = await nc.jetstreamManager();
      // One server here: the replica count is the only thing a single node cannot honour.
      await jsm.streams.add({ ...stream, num_replicas: 1 });
      await jsm.consumers.add(stream.name, consumer);
      await ensureSettlementStream(nc, names, { maxAckPending: 20_000 });
      const s = await jsm.streams.info(names.stream);
      expect(s.config).toMatchObject({ ...stream, num_replicas: 1 });
      const c = await jsm.consumers.info(names.stream, names.durable);
      expect(c.config).toMatchObject({ ...consumer, max_ack_pending: 20_000 });
    } finally {
      await nc.close();
    }
  });

  it('when redis.conf is read, then it has the settings the service relies on, and redis-server starts with it', async () => {
    const conf = new Map(
      read('deploy/redis/redis.conf')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => [l.split(/\s+/)[0]!, l.split(/\s+/).slice(1).join(' ')] as const),
    );
    expect(Object.fromEntries(conf)).toMatchObject({
      'cluster-enabled': 'yes',
      'cluster-node-timeout': '2000',
      appendonly: 'yes',
      appendfsync: 'everysec',
      'maxmemory-policy': 'noeviction',
      'repl-diskless-sync': 'yes',
      'min-replicas-to-write': '0',
      'stream-node-max-bytes': '512',
    });

    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'shardstock-redisconf-'));
    const server = spawn(
      'redis-server',
      [join(DEPLOY, 'redis/redis.conf'), '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--maxmemory', '64mb'],
      { stdio: 'ignore' },
    );
    cleanups.push(() => stop(server, dir));
    const cli = (...args: string[]) =>
      spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim();
    await retry(async () => {
      if (cli('ping') !== 'PONG') throw new Error('not up');
    });
    expect(cli('config', 'get', 'maxmemory-policy')).toBe('maxmemory-policy\nnoeviction');
    expect(cli('config', 'get', 'cluster-node-timeout')).toBe('cluster-node-timeout\n2000');
    expect(cli('config', 'get', 'appendonly')).toBe('appendonly\nyes');
    expect(cli('config', 'get', 'stream-node-max-bytes')).toBe('stream-node-max-bytes\n512');
    expect(cli('info', 'cluster')).toContain('cluster_enabled:1');
  });
});

describe('docs: the configuration table', () => {
  it('when a document carries the generated table, then it is the one config.ts produces today', () => {
    const table = markdownTable();
    expect(table.split('\n')).toHaveLength(configRows().length + 2);
    let found = 0;
    for (const file of DOCUMENTS_WITH_TABLE) {
      if (!existsSync(file)) continue;
      const doc = readFileSync(file, 'utf8');
      if (!doc.includes(TABLE_START)) continue;
      found++;
      expect(doc.includes(TABLE_END), file).toBe(true);
      expect(withTable(doc, table), `${file} is stale: run  npm run docs:config -- --write`).toBe(doc);
    }
    expect(found).toBeGreaterThanOrEqual(1);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

async function retry<T>(fn: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function stop(child: ChildProcess, dir: string): void {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
