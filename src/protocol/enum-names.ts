// Names of protobuf enum values, from the generated descriptors rather than typed by hand: the value's name
// without the enum's prefix, lower-cased (DEDUCT_OUTCOME_SOLD_OUT → "sold_out"), as metrics labels and the
// CLI's JSON show them.
import type { DescEnum } from '@bufbuild/protobuf';

/** undefined for a number the descriptor does not know (a newer server's value). */
export function enumValueName(desc: DescEnum, value: number): string | undefined {
  return desc.value[value]?.localName.toLowerCase();
}
