// connect-es answers a request body that is not valid protobuf binary with INTERNAL ("parse binary: …"): its
// serializer is shared with clients, for whom a bad message is the server's fault. On a server it is the
// caller's fault, and INTERNAL would send people hunting for a bug that is not there. This rewrites those
// answers to INVALID_ARGUMENT in each shape they take on the HTTP port: a unary Connect error body, a Connect
// end-of-stream message, gRPC trailers (or trailers-only headers) and gRPC-Web trailer frames. (JSON that
// does not parse is already INVALID_ARGUMENT.)
import type { UniversalHandler, UniversalServerResponse } from '@connectrpc/connect/protocol';

import { GrpcCode } from './status.js';

const PREFIX = 'parse binary: ';
const { INTERNAL, INVALID_ARGUMENT } = GrpcCode;

export function parseErrorsAreInvalidArgument(handlers: UniversalHandler[]): void {
  for (let i = 0; i < handlers.length; i++) {
    const h = handlers[i]!;
    const what = `request: not a valid ${h.method.input.typeName} message`;
    handlers[i] = Object.assign(async (req: Parameters<UniversalHandler>[0]) => rewrite(await h(req), what), h);
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder();

async function rewrite(res: UniversalServerResponse, what: string): Promise<UniversalServerResponse> {
  const type = res.header?.get('content-type') ?? '';
  if (type.startsWith('application/grpc-web')) return { ...res, body: res.body && mapChunks(res.body, (c) => grpcWebTrailer(c, what)) };
  if (type.startsWith('application/grpc')) return grpc(res, what);
  if (type.startsWith('application/connect+')) return { ...res, body: res.body && mapChunks(res.body, (c) => connectEndStream(c, what)) };
  if (res.status === 500 && type.startsWith('application/json') && res.body) return connectUnary(res, what);
  return res;
}

async function connectUnary(res: UniversalServerResponse, what: string): Promise<UniversalServerResponse> {
  const chunks: Uint8Array[] = [];
  for await (const c of res.body!) chunks.push(c);
  const bytes = Buffer.concat(chunks);
  const fixed = fixConnectError(bytes, what);
  if (!fixed) return { ...res, body: once(bytes) };
  res.header!.set('content-length', String(fixed.length));
  return { ...res, status: 400, body: once(fixed) };
}

/** `{"code":"internal","message":"parse binary: …"}` → invalid_argument, or undefined when it is another error. */
function fixConnectError(bytes: Uint8Array, what: string): Uint8Array | undefined {
  try {
    const err = JSON.parse(dec.decode(bytes)) as { code?: string; message?: string };
    if (err.code !== 'internal' || !err.message?.startsWith(PREFIX)) return undefined;
    return enc.encode(JSON.stringify({ code: 'invalid_argument', message: `${what} (${err.message.slice(PREFIX.length)})` }));
  } catch {
    return undefined;
  }
}

function connectEndStream(chunk: Uint8Array, what: string): Uint8Array {
  if (chunk.length < 5 || (chunk[0]! & 0b10) === 0) return chunk;
  try {
    const end = JSON.parse(dec.decode(chunk.subarray(5))) as { error?: { code?: string; message?: string } };
    const fixed = end.error && fixConnectError(enc.encode(JSON.stringify(end.error)), what);
    if (!fixed) return chunk;
    return envelope(chunk[0]!, enc.encode(JSON.stringify({ ...end, error: JSON.parse(dec.decode(fixed)) })));
  } catch {
    return chunk;
  }
}

function grpc(res: UniversalServerResponse, what: string): UniversalServerResponse {
  const fix = (h: Headers | undefined) => {
    if (h?.get('grpc-status') !== String(INTERNAL)) return;
    const message = decodeURIComponent(h.get('grpc-message') ?? '');
    if (!message.startsWith(PREFIX)) return;
    h.set('grpc-status', String(INVALID_ARGUMENT));
    h.set('grpc-message', encodeURIComponent(`${what} (${message.slice(PREFIX.length)})`));
  };
  fix(res.header);
  if (!res.body) {
    fix(res.trailer);
    return res;
  }
  const body = res.body;
  return {
    ...res,
    body: (async function* () {
      yield* body;
      // Trailers are filled in while the body is produced.
      fix(res.trailer);
    })(),
  };
}

function grpcWebTrailer(chunk: Uint8Array, what: string): Uint8Array {
  if (chunk.length < 5 || (chunk[0]! & 0x80) === 0) return chunk;
  const text = dec.decode(chunk.subarray(5));
  const status = /^grpc-status:\s*(\d+)\s*$/im.exec(text);
  const message = /^grpc-message:\s*(.*?)\s*$/im.exec(text);
  if (Number(status?.[1]) !== INTERNAL || !message) return chunk;
  const decoded = decodeURIComponent(message[1]!);
  if (!decoded.startsWith(PREFIX)) return chunk;
  const fixed = text
    .replace(status![0], `grpc-status: ${INVALID_ARGUMENT}`)
    .replace(message[0], `grpc-message: ${encodeURIComponent(`${what} (${decoded.slice(PREFIX.length)})`)}`);
  return envelope(chunk[0]!, enc.encode(fixed));
}

function envelope(flags: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

async function* mapChunks(body: AsyncIterable<Uint8Array>, f: (c: Uint8Array) => Uint8Array): AsyncIterable<Uint8Array> {
  for await (const c of body) yield f(c);
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
