// The gate link, outermost in the call chain: a call whose deadline has already passed, or that the gate
// refuses (src/access/call-gate.ts: auth, rate limit, in-flight and stream bounds), never reaches the links
// behind it; an admitted call is released when it ends (a stream: when it stops streaming).
import type { DescMethod } from '@bufbuild/protobuf';
import { DomainError } from '../domain/errors.js';
import type { Admission, Call, Link, RefusalHook } from './call-link.js';

const noRefusal = () => {};

export function gateLink(gate: Admission | undefined, onRefused: RefusalHook | undefined): Link {
  const admit = (method: DescMethod) => {
    const refused = onRefused?.(method) ?? noRefusal;
    const name = method.name;
    return (call: Call): (() => void) => {
      try {
        if (call.signal.aborted) throw new DomainError('deadline_exceeded', 'deadline exceeded before the call started');
        return gate ? gate.admit(name, call) : noRefusal;
      } catch (err) {
        refused(call, err);
        throw err;
      }
    };
  };
  return {
    unary(next, method) {
      const enter = admit(method);
      return async (req, call) => {
        const release = enter(call);
        try {
          return await next(req, call);
        } finally {
          release();
        }
      };
    },
    stream(next, method) {
      const enter = admit(method);
      return async function* (req, call) {
        const release = enter(call);
        try {
          yield* next(req, call);
        } finally {
          release();
        }
      };
    },
  };
}
