// Server reflection straight from the protobuf-es descriptors (no proto-loader, no .proto files at run
// time): @grpc/reflection only needs each service's serialized FileDescriptorProtos with their dependencies.
//
// Every service on the gRPC port is described by a descriptor generated from its real .proto under its
// canonical name. grpc-health-check's own descriptor cannot be used: proto-loader renames its file to
// grpc_health_v1.proto and names the map entry of HealthListResponse.statuses `Statuses` instead of
// `StatusesEntry`, which Go's protodesc (buf curl, grpcurl) rejects, so those tools could not resolve
// grpc.health.v1.Health at all.
import { toBinary, type DescFile } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { file_grpc_health_v1_health } from '../gen/grpc/health/v1/health_pb.js';
import { file_grpc_reflection_v1_reflection } from '../gen/grpc/reflection/v1/reflection_pb.js';
import { file_grpc_reflection_v1alpha_reflection } from '../gen/grpc/reflection/v1alpha/reflection_pb.js';
import { file_inventory_v1_inventory } from '../gen/inventory/v1/inventory_pb.js';

/** The files of the services served on the gRPC port; reflection lists every service they define. */
export const SERVED_FILES: readonly DescFile[] = [
  file_inventory_v1_inventory,
  file_grpc_health_v1_health,
  file_grpc_reflection_v1_reflection,
  file_grpc_reflection_v1alpha_reflection,
];

function withDependencies(file: DescFile, out = new Map<string, DescFile>()): Map<string, DescFile> {
  if (out.has(file.name)) return out;
  for (const dep of file.dependencies) withDependencies(dep, out);
  out.set(file.name, file);
  return out;
}

export function reflectionRoot(): Record<string, { fileDescriptorProtos: Buffer[] }> {
  const root: Record<string, { fileDescriptorProtos: Buffer[] }> = {};
  for (const file of SERVED_FILES) {
    const protos = [...withDependencies(file).values()].map((f) => Buffer.from(toBinary(FileDescriptorProtoSchema, f.proto)));
    for (const service of file.services) root[service.typeName] = { fileDescriptorProtos: protos };
  }
  return root;
}
