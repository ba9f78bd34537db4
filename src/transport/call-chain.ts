// The one interceptor chain in front of the handler set: gate → instrument → handler, composed once per RPC
// at start-up and served by both ports (grpc-server.ts, connect-routes.ts), the way connect-es composes its
// interceptors (each link wraps the next; the first link is the outermost).
//
// The chain walks InventoryService.methods from the generated descriptor, so an RPC added to the proto gets
// the gate and the instrumentation just by having a handler in the handler set (a method without one
// answers UNIMPLEMENTED, through the same gate and counters). Nothing here is per call: each link builds its
// step function once per method, and a call carries one object (Call) that is also the handler's context.
import type { DescMethod } from '@bufbuild/protobuf';
import { DomainError } from '../domain/errors.js';
import { InventoryService } from '../gen/inventory/v1/inventory_pb.js';
import type { Admission, Link, RefusalHook, StreamStep, UnaryStep } from './call-link.js';
import { gateLink } from './gate-link.js';
import type { CallContext, InventoryHandlers } from './handlers.js';

export type { Admission, Call, Link, StreamStep, UnaryStep } from './call-link.js';

export interface CallChainOptions {
  /** The outermost link: admission (auth, rate limit, in-flight and stream bounds). */
  gate?: Admission | undefined;
  /** The links between the gate and the handler, outermost first (instrumentation, src/observability). */
  links?: readonly Link[] | undefined;
  /** Told about a call the gate refused, before the refusal is answered (the instrumentation counts it). */
  onRefused?: RefusalHook | undefined;
}

function unimplemented(method: DescMethod): DomainError {
  return new DomainError('unimplemented', `${method.name} is not served by this instance`);
}

/** The innermost step: the handler of the set named after the method (its localName), or UNIMPLEMENTED. */
function handlerStep(handlers: Partial<InventoryHandlers>, method: DescMethod): UnaryStep | StreamStep {
  const fn = (handlers as Record<string, ((req: unknown, ctx: CallContext) => unknown) | undefined>)[method.localName];
  if (method.methodKind === 'server_streaming') {
    // Fails on its first next(), where a stream's failures arrive.
    const failing: AsyncIterable<never> = { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(unimplemented(method)) }) };
    if (!fn) return () => failing;
    return (req, call) => fn.call(handlers, req, call) as AsyncIterable<unknown>;
  }
  if (!fn) {
    return async () => {
      throw unimplemented(method);
    };
  }
  return (req, call) => fn.call(handlers, req, call) as Promise<unknown>;
}

export class CallChain {
  /** Unary steps by method localName. */
  private readonly unarySteps = new Map<string, UnaryStep>();
  private readonly streamSteps = new Map<string, StreamStep>();
  readonly gate: Admission | undefined;
  readonly methods: readonly DescMethod[] = InventoryService.methods;

  constructor(handlers: Partial<InventoryHandlers>, options: CallChainOptions = {}) {
    this.gate = options.gate;
    // Outermost first, as connect-es takes its interceptors; composed from the handler outwards.
    const links = [gateLink(options.gate, options.onRefused), ...(options.links ?? [])];
    for (const method of this.methods) {
      if (method.methodKind === 'unary') {
        let step = handlerStep(handlers, method) as UnaryStep;
        for (let i = links.length - 1; i >= 0; i--) step = links[i]!.unary(step, method);
        this.unarySteps.set(method.localName, step);
      } else if (method.methodKind === 'server_streaming') {
        let step = handlerStep(handlers, method) as StreamStep;
        for (let i = links.length - 1; i >= 0; i--) step = links[i]!.stream(step, method);
        this.streamSteps.set(method.localName, step);
      }
      // Client and bidi streaming: the service has none; a port serves only the kinds it finds here.
    }
  }

  /** The composed step of a unary method (resolved once by the port, when it registers the method). */
  unary(method: DescMethod): UnaryStep {
    const s = this.unarySteps.get(method.localName);
    if (!s) throw new Error(`${method.name} is not a unary method of ${InventoryService.typeName}`);
    return s;
  }

  stream(method: DescMethod): StreamStep {
    const s = this.streamSteps.get(method.localName);
    if (!s) throw new Error(`${method.name} is not a server-streaming method of ${InventoryService.typeName}`);
    return s;
  }
}

/** A port takes a chain, or a bare handler set (tests, bench baselines), which gets a chain with no gate. */
export function asCallChain(x: CallChain | Partial<InventoryHandlers>): CallChain {
  return x instanceof CallChain ? x : new CallChain(x);
}
