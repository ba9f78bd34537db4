// Names of protobuf enum values, from the generated descriptors rather than typed by hand: the value's name
// without the enum's prefix, lower-cased (DEDUCT_OUTCOME_SOLD_OUT → "sold_out"), as metrics labels and the
// CLI's JSON show them, and as the domain names its outcomes. This is the only place those names are made.
import type { DescEnum, DescMessage } from '@bufbuild/protobuf';

/** undefined for a number the descriptor does not know (a newer server's value). */
export function enumValueName(desc: DescEnum, value: number): string | undefined {
  return desc.value[value]?.localName.toLowerCase();
}

/** Enum values by their lower-cased name, for turning a domain outcome ("sold_out") into the proto value.
 *  Typed by the generated TS enum, so a domain outcome the proto does not have fails to compile. */
export function enumValuesByName<E extends Record<string, string | number>>(
  desc: DescEnum,
  _generated: E,
): Record<Lowercase<Extract<keyof E, string>>, E[keyof E]> {
  const out: Record<string, number> = {};
  for (const v of desc.values) out[v.localName.toLowerCase()] = v.number;
  return out as Record<Lowercase<Extract<keyof E, string>>, E[keyof E]>;
}

/** The outcome label of a response, decided from its message descriptor once per method: `replayed` when a
 *  `replayed` field is set, else the name of its `outcome` enum field, else `unchanged` when a `changed` field
 *  is false, else `ok`. A new RPC whose response has any of these fields is labelled without code here. */
export function outcomeLabeller(desc: DescMessage): (res: unknown) => string {
  const replayed = desc.field.replayed?.fieldKind === 'scalar' ? 'replayed' : undefined;
  const outcome = desc.field.outcome;
  const outcomeEnum = outcome?.fieldKind === 'enum' ? outcome.enum : undefined;
  const changed = desc.field.changed?.fieldKind === 'scalar' ? 'changed' : undefined;
  if (!replayed && !outcomeEnum && !changed) return () => 'ok';
  return (res) => {
    const r = res as Record<string, unknown>;
    if (replayed && r.replayed === true) return 'replayed';
    if (outcomeEnum) return enumValueName(outcomeEnum, r.outcome as number) ?? 'unknown';
    if (changed && r.changed === false) return 'unchanged';
    return 'ok';
  };
}
