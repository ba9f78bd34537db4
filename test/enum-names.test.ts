// Outcome labels (metrics, CLI JSON) come from the protobuf descriptors: pinned here, since dashboards and
// scripts match on them.
import { describe, expect, it } from 'vitest';
import { create } from '@bufbuild/protobuf';
import {
  CompensateOutcome,
  CompensateOutcomeSchema,
  CompensateResponseSchema,
  CreateCouponResponseSchema,
  DeductOutcome,
  DeductOutcomeSchema,
  DeductResponseSchema,
  PauseSaleResponseSchema,
  RestockResponseSchema,
} from '../src/gen/inventory/v1/inventory_pb.js';
import { enumValueName, enumValuesByName, outcomeLabeller } from '../src/protocol/enum-names.js';

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

describe('enumValuesByName', () => {
  it('when a domain outcome is looked up, then it is the proto value of the same name', () => {
    const deduct = enumValuesByName(DeductOutcomeSchema, DeductOutcome);
    expect(deduct.sold_out).toBe(DeductOutcome.SOLD_OUT);
    expect(deduct.sale_paused).toBe(DeductOutcome.SALE_PAUSED);
    expect(enumValuesByName(CompensateOutcomeSchema, CompensateOutcome).not_deducted).toBe(CompensateOutcome.NOT_DEDUCTED);
    // Every value of the enum, and nothing else.
    expect(Object.values(deduct).sort()).toEqual(DeductOutcomeSchema.values.map((v) => v.number).sort());
  });
});

describe('outcomeLabeller', () => {
  it('when a response is labelled, then replayed wins, then the outcome enum, then changed=false is unchanged, else ok', () => {
    const deduct = outcomeLabeller(DeductResponseSchema);
    expect(deduct(create(DeductResponseSchema, { outcome: DeductOutcome.SOLD_OUT }))).toBe('sold_out');
    expect(deduct(create(DeductResponseSchema, { outcome: DeductOutcome.DEDUCTED, replayed: true }))).toBe('replayed');
    expect(deduct(create(DeductResponseSchema, { outcome: 99 as DeductOutcome }))).toBe('unknown');
    expect(outcomeLabeller(CompensateResponseSchema)(create(CompensateResponseSchema, { outcome: CompensateOutcome.COMPENSATED }))).toBe(
      'compensated',
    );
    const restock = outcomeLabeller(RestockResponseSchema);
    expect(restock(create(RestockResponseSchema, { replayed: true }))).toBe('replayed');
    expect(restock(create(RestockResponseSchema, {}))).toBe('ok');
    const pause = outcomeLabeller(PauseSaleResponseSchema);
    expect(pause(create(PauseSaleResponseSchema, { changed: false }))).toBe('unchanged');
    expect(pause(create(PauseSaleResponseSchema, { changed: true }))).toBe('ok');
    // `created` is none of the three: a repeated CreateCoupon is still ok.
    expect(outcomeLabeller(CreateCouponResponseSchema)(create(CreateCouponResponseSchema, { created: false }))).toBe('ok');
  });
});
