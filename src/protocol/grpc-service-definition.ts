// The grpc-js service definition of a protobuf-es service: paths and protobuf-es serializers. Shared by the
// server (src/transport/grpc-server.ts) and the client (src/client/), so the client never loads server code.
import type * as grpc from '@grpc/grpc-js';
import { fromBinary, toBinary, type DescMessage, type DescService } from '@bufbuild/protobuf';

function serializer(schema: DescMessage) {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: grpc-js's Serialize<any>
    serialize: (msg: any) => Buffer.from(toBinary(schema, msg)),
    deserialize: (buf: Buffer) => fromBinary(schema, buf),
  };
}

export function serviceDefinition(service: DescService): grpc.ServiceDefinition {
  const def: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const m of service.methods) {
    const req = serializer(m.input);
    const res = serializer(m.output);
    def[m.localName] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: false,
      responseStream: m.methodKind === 'server_streaming',
      requestSerialize: req.serialize,
      requestDeserialize: req.deserialize,
      responseSerialize: res.serialize,
      responseDeserialize: res.deserialize,
    };
  }
  return def;
}
