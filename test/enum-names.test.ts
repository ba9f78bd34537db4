// Outcome labels (metrics, CLI JSON) come from the protobuf descriptors: pinned here, since dashboards and
// scripts match on them.
import { describe, expect, it } from 'vitest';
import { CompensateOutcome, CompensateOutcomeSchema, DeductOutcome, DeductOutcomeSchema } from '../src/gen/inventory/v1/inventory_pb.js';
import { enumValueName } from '../src/protocol/enum-names.js';

describe('enumValueName', () => {
  it('when an outcome is named, then it is the value without its enum prefix, lower-cased', () => {
    expect(enumValueName(DeductOutcomeSchema, DeductOutcome.UNSPECIFIED)).toBe('unspecified');
    expect(enumValueName(DeductOutcomeSchema, DeductOutcome.DEDUCTED)).toBe('deducted');
    expect(enumValueName(DeductOutcomeSchema, DeductOutcome.SOLD_OUT)).toBe('sold_out');
    expect(enumValueName(DeductOutcomeSchema, DeductOutcome.INSUFFICIENT)).toBe('insufficient');
    expect(enumValueName(DeductOutcomeSchema, DeductOutcome.USER_LIMIT_EXCEEDED)).toBe('user_limit_exceeded');
    expect(enumValueName(CompensateOutcomeSchema, CompensateOutcome.COMPENSATED)).toBe('compensated');
    expect(enumValueName(CompensateOutcomeSchema, CompensateOutcome.ALREADY_COMPENSATED)).toBe('already_compensated');
    expect(enumValueName(CompensateOutcomeSchema, CompensateOutcome.NOT_DEDUCTED)).toBe('not_deducted');
  });

  it('when a value is unknown to the descriptor, then there is no name', () => {
    expect(enumValueName(DeductOutcomeSchema, 99)).toBeUndefined();
  });
});
