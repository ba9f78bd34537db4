// Every Redis key the baselines use, built here only. A coupon's keys share one {hash tag} so the lock
// baseline's lock and counter live on the same node, as they would in a real deployment.

export function singleKey(ns: string, couponId: string): string {
  return `${ns}:sk:{${couponId}}`;
}

export function lockKeys(ns: string, couponId: string): { stock: string; lock: string } {
  return { stock: `${ns}:lk:{${couponId}}:stock`, lock: `${ns}:lk:{${couponId}}:lock` };
}
