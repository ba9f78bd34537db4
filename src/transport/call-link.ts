// The types every link of the call chain (call-chain.ts) shares: the one object a call carries, the step
// functions links wrap, and the admission check the gate link runs.
import type { DescMethod } from '@bufbuild/protobuf';
import type { Caller } from '../access/call-gate.js';
import type { Transport } from '../observability/metrics.js';
import type { CallContext } from './handlers.js';

/** What a port knows about one call: the handler's context (signal, x-request-id) and the caller (for the
 * gate). One object per call, built by the adapter and passed down every link to the handler. */
export interface Call extends CallContext, Caller {
  readonly transport: Transport;
}

export type UnaryStep = (req: unknown, call: Call) => Promise<unknown>;
export type StreamStep = (req: unknown, call: Call) => AsyncIterable<unknown>;

/** One link of the chain: given the next step and the method it serves, returns its own step. Called once
 * per method when the chain is built, never per call. */
export interface Link {
  unary(next: UnaryStep, method: DescMethod): UnaryStep;
  stream(next: StreamStep, method: DescMethod): StreamStep;
}

/** The admission check the gate link runs (src/access/call-gate.ts); health Watch and reflection on the
 * gRPC port pass the same one. */
export interface Admission {
  /** Throws a DomainError to refuse; otherwise returns the function to call once the call is over. */
  admit(method: string, caller: Caller): () => void;
}

/** Told about a call the gate refused, before the refusal is answered; resolved once per method. */
export type RefusalHook = (method: DescMethod) => (call: Call, err: unknown) => void;
