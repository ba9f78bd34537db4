// Server reflection straight from the protobuf-es descriptors (no proto-loader, no .proto files at run
// time): @grpc/reflection only needs each service's serialized FileDescriptorProtos with their dependencies.
import { toBinary, type DescFile } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { service as healthService } from 'grpc-health-check';
import { file_inventory_v1_inventory } from '../gen/inventory/v1/inventory_pb.js';

function withDependencies(file: DescFile, out = new Map<string, DescFile>()): Map<string, DescFile> {
  if (out.has(file.name)) return out;
  for (const dep of file.dependencies) withDependencies(dep, out);
  out.set(file.name, file);
  return out;
}

export function reflectionRoot(): Record<string, { fileDescriptorProtos: Buffer[] }> {
  const files = [...withDependencies(file_inventory_v1_inventory).values()];
  const root: Record<string, { fileDescriptorProtos: Buffer[] }> = {
    'inventory.v1.InventoryService': { fileDescriptorProtos: files.map((f) => Buffer.from(toBinary(FileDescriptorProtoSchema, f.proto))) },
  };
  // grpc-health-check ships its service as a proto-loader definition, descriptors included.
  const check = (healthService as unknown as Record<string, { requestType?: { fileDescriptorProtos?: Buffer[] } }>).Check;
  if (check?.requestType?.fileDescriptorProtos)
    root['grpc.health.v1.Health'] = { fileDescriptorProtos: check.requestType.fileDescriptorProtos };
  return root;
}
