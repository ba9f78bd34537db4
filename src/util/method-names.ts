// The method names of an object and its class chain: what the adapter wrappers (guardErrors, timed) wrap
// once at start-up instead of trapping every property access.
export function methodNames(target: object): string[] {
  const names = new Set<string>();
  for (let o: object | null = target; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const n of Object.getOwnPropertyNames(o)) {
      if (n !== 'constructor' && typeof (target as Record<string, unknown>)[n] === 'function') names.add(n);
    }
  }
  return [...names];
}
