// The gate link, outermost in the call chain: a call whose deadline has already passed, or that the gate
// refuses (src/access/call-gate.ts: auth, rate limit, in-flight and stream bounds), never reaches the links
// behind it; an admitted call is released when it ends (a stream: when it stops streaming).
import type { DescMethod } from '@bufbuild/protobuf';
import { DomainError } from '../domain/errors.js';
import type { Admission, Call, Link, RefusalHook } from './call-link.js';

const noRefusal = () => {};
const pastDeadline = () => new DomainError('deadline_exceeded', 'deadline exceeded before the call started');

export function gateLink(gate: Admission | undefined, onRefused: RefusalHook | undefined): Link {
  const admit = (method: DescMethod) => {
    const refused = onRefused?.(method) ?? noRefusal;
    const name = method.name;
    return (call: Call): (() => void) => {
      try {
        if (call.signal.aborted) throw pastDeadline();
        return gate ? gate.admit(name, call) : noRefusal;
      } catch (err) {
        refused(call, err);
        throw err;
      }
    };
  };
  if (!gate) {
    // No gate (tests, bench baselines): only the deadline check, without a promise of its own per call.
    return {
      unary: (next, method) => {
        const refused = onRefused?.(method) ?? noRefusal;
        return (req, call) => {
          if (!call.signal.aborted) return next(req, call);
          const err = pastDeadline();
          refused(call, err);
          return Promise.reject(err);
        };
      },
      stream: (next, method) => {
        const enter = admit(method);
        return async function* (req, call) {
          enter(call);
          yield* next(req, call);
        };
      },
    };
  }
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
