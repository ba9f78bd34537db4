// biome-ignore-all lint/suspicious/noExplicitAny: clients loaded from .proto files at run time, as grpcurl-like tools see the port
// The two ports: grpc-js (with reflection and health) and Connect/JSON over HTTP/1.1 and h2c.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as h2connect } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { fileURLToPath } from 'node:url';
import { startTestApp, uniqueId, type TestApp } from './support/harness.js';
import { DeductOutcome, type DeductRequest, DeductRequestSchema, DeductResponseSchema } from '../src/gen/inventory/v1/inventory_pb.js';
import { preEncoded, SoldOutReplies } from '../src/transport/sold-out-replies.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

const nm = (p: string) => fileURLToPath(new URL(`../node_modules/${p}`, import.meta.url));

function loadService(protoFile: string, includeDir: string, path: string[]) {
  const def = protoLoader.loadSync(protoFile, { includeDirs: [includeDir], keepCase: true, longs: String, enums: String, defaults: true });
  let obj: any = grpc.loadPackageDefinition(def);
  for (const p of path) obj = obj[p];
  return obj as grpc.ServiceClientConstructor;
}

describe('gRPC port', () => {
  it('when a reflection client lists services and fetches descriptors, then it can call GetStock with no proto files (as grpcurl does)', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 42n, shardCount: 3 });
    const Reflection = loadService(
      nm('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto'),
      nm('@grpc/reflection/build/proto'),
      ['grpc', 'reflection', 'v1', 'ServerReflection'],
    );
    const rc = new Reflection(t.grpcAddr, grpc.credentials.createInsecure());
    const ask = (req: object) =>
      new Promise<any>((resolve, reject) => {
        const call = (rc as any).ServerReflectionInfo();
        call.on('data', (d: unknown) => {
          resolve(d);
          call.end();
        });
        call.on('error', reject);
        call.write(req);
      });
    const list = await ask({ list_services: '' });
    const names = list.list_services_response.service.map((s: { name: string }) => s.name);
    expect(names).toContain('inventory.v1.InventoryService');
    expect(names).toContain('grpc.health.v1.Health');

    const files = await ask({ file_containing_symbol: 'inventory.v1.InventoryService' });
    const protos = files.file_descriptor_response.file_descriptor_proto.map((b: Buffer) => fromBinary(FileDescriptorProtoSchema, b));
    expect(protos.map((p: { name: string }) => p.name)).toContain('inventory/v1/inventory.proto');
    // Dependencies (google/protobuf/timestamp.proto) are either sent too or resolvable by name.
    const byName = new Map(protos.map((p: { name: string }) => [p.name, p]));
    if (!byName.has('google/protobuf/timestamp.proto')) {
      const ts = await ask({ file_by_filename: 'google/protobuf/timestamp.proto' });
      for (const b of ts.file_descriptor_response.file_descriptor_proto) {
        const p = fromBinary(FileDescriptorProtoSchema, b);
        byName.set(p.name, p);
      }
    }
    const registry = createFileRegistry(byName.get('inventory/v1/inventory.proto') as never, (name: string) => byName.get(name) as never);
    const service = registry.getService('inventory.v1.InventoryService')!;
    const method = service.methods.find((m) => m.name === 'GetStock')!;
    const input = method.input as DescMessage;
    const output = method.output as DescMessage;
    const generic = new grpc.Client(t.grpcAddr, grpc.credentials.createInsecure());
    const res = await new Promise<any>((resolve, reject) =>
      generic.makeUnaryRequest(
        `/inventory.v1.InventoryService/GetStock`,
        (m: any) => Buffer.from(toBinary(input, m)),
        (b: Buffer) => fromBinary(output, b),
        create(input, { couponId: id } as never),
        (err, r) => (err ? reject(err) : resolve(r)),
      ),
    );
    expect(res.level.couponId).toBe(id);
    expect(res.level.available).toBe(42n);
    rc.close();
    generic.close();
  });

  it('when grpc.health.v1 is asked, then the service reports SERVING and Watch streams the status', async () => {
    const Health = loadService(nm('grpc-health-check/proto/health/v1/health.proto'), nm('grpc-health-check/proto'), [
      'grpc',
      'health',
      'v1',
      'Health',
    ]);
    const hc = new Health(t.grpcAddr, grpc.credentials.createInsecure()) as any;
    const check = (service: string) =>
      new Promise<any>((resolve, reject) => hc.Check({ service }, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))));
    expect((await check('')).status).toBe('SERVING');
    expect((await check('inventory.v1.InventoryService')).status).toBe('SERVING');
    const first = await new Promise<any>((resolve, reject) => {
      const w = hc.Watch({ service: 'inventory.v1.InventoryService' });
      w.on('data', (d: unknown) => {
        resolve(d);
        w.cancel();
      });
      w.on('error', (e: grpc.ServiceError) => (e.code === grpc.status.CANCELLED ? undefined : reject(e)));
    });
    expect(first.status).toBe('SERVING');
    hc.close();
  });

  it('when a method is not implemented yet, then UNIMPLEMENTED or a real answer — never INTERNAL', async () => {
    const e = await t.client.reconcile({ couponId: uniqueId() }).then(
      () => null,
      (err: grpc.ServiceError) => err,
    );
    expect([grpc.status.NOT_FOUND, grpc.status.UNIMPLEMENTED]).toContain(e?.code);
  });
});

describe('pre-encoded SOLD_OUT replies', () => {
  /** What the handler would build and grpc-js encode for a refusal from `shard`, made afresh. */
  const fresh = (shard: number) =>
    Buffer.from(
      toBinary(
        DeductResponseSchema,
        create(DeductResponseSchema, {
          outcome: DeductOutcome.SOLD_OUT,
          replayed: false,
          remaining: 0n,
          shard,
          granted: 0n,
          compensated: false,
        }),
      ),
    );

  it("when a shard's SOLD_OUT reply is cached, then its bytes equal a freshly encoded reply, and it is one frozen message per shard", () => {
    const replies = new SoldOutReplies();
    for (const shard of [0, 1, 7, 15, 127, 1023]) {
      const msg = replies.reply(shard);
      expect(preEncoded(msg)).toEqual(fresh(shard));
      expect(replies.reply(shard)).toBe(msg);
      expect(Object.isFrozen(msg)).toBe(true);
      // The message itself is the ordinary one (what Connect encodes).
      expect(Buffer.from(toBinary(DeductResponseSchema, msg))).toEqual(fresh(shard));
    }
    expect(preEncoded(create(DeductResponseSchema, { outcome: DeductOutcome.SOLD_OUT }))).toBeUndefined();
  });

  it('when a sold-out coupon refuses over gRPC and Connect, then the gRPC bytes are a fresh encoding of the reply and Connect answers the same', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 1n, shardCount: 4 });
    expect((await t.client.deduct({ couponId: id, requestId: `${id}-a`, quantity: 1n })).outcome).toBe(DeductOutcome.DEDUCTED);
    const generic = new grpc.Client(t.grpcAddr, grpc.credentials.createInsecure());
    const raw = (requestId: string) =>
      new Promise<Buffer>((resolve, reject) =>
        generic.makeUnaryRequest(
          '/inventory.v1.InventoryService/Deduct',
          (m: DeductRequest) => Buffer.from(toBinary(DeductRequestSchema, m)),
          (b: Buffer) => b,
          create(DeductRequestSchema, { couponId: id, requestId, quantity: 1n }),
          (err, r) => (err ? reject(err) : resolve(r!)),
        ),
      );
    // The first refusal marks the coupon sold out; the next ones come from memory.
    const shards = new Set<number>();
    for (let i = 0; i < 12; i++) {
      const bytes = await raw(`${id}-r${i}`);
      const res = fromBinary(DeductResponseSchema, bytes);
      expect(res.outcome).toBe(DeductOutcome.SOLD_OUT);
      expect(bytes).toEqual(fresh(res.shard));
      shards.add(res.shard);
    }
    expect(shards.size).toBeGreaterThan(1);
    generic.close();
    const res = await fetch(`${t.httpUrl}/inventory.v1.InventoryService/Deduct`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ couponId: id, requestId: `${id}-json`, quantity: '1' }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ outcome: 'DEDUCT_OUTCOME_SOLD_OUT' });
  });
});

describe('HTTP port (connect-node)', () => {
  it('when curl posts JSON over HTTP/1.1, then GetStock answers in JSON', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 9n, shardCount: 2 });
    const res = await fetch(`${t.httpUrl}/inventory.v1.InventoryService/GetStock`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ couponId: id }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { level: { couponId: string; available: string } };
    expect(body.level).toMatchObject({ couponId: id, available: '9' });
  });

  it('when a Connect GET is made (no side effects), then GetStock answers too', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 4n, shardCount: 2 });
    const msg = encodeURIComponent(JSON.stringify({ couponId: id }));
    const res = await fetch(`${t.httpUrl}/inventory.v1.InventoryService/GetStock?connect=v1&encoding=json&message=${msg}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { level: { available: string } }).level.available).toBe('4');
  });

  it('when JSON input is bad, then the Connect error names the field', async () => {
    const res = await fetch(`${t.httpUrl}/inventory.v1.InventoryService/Deduct`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ couponId: 'x', requestId: '' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(/request_id/) });
  });

  it('when a client speaks cleartext HTTP/2 (h2c), then the same port answers', async () => {
    const id = uniqueId();
    await t.client.createCoupon({ couponId: id, totalStock: 5n, shardCount: 2 });
    const session = h2connect(t.httpUrl);
    const body = await new Promise<string>((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': '/inventory.v1.InventoryService/GetStock',
        'content-type': 'application/json',
      });
      let data = '';
      req.on('data', (d) => (data += d));
      req.on('end', () => resolve(data));
      req.on('error', reject);
      req.end(JSON.stringify({ couponId: id }));
    });
    session.close();
    expect(JSON.parse(body).level.available).toBe('5');
  });

  it('when /healthz and /readyz are asked, then both report the real state', async () => {
    expect((await fetch(`${t.httpUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${t.httpUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, checks: { redis: { ok: true }, mysql: { ok: true }, nats: { ok: true } } });
  });
});
