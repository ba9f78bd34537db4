// Every NATS subject shardstock publishes or subscribes to, built in one place from the namespace (as
// src/redis/keys.ts does for Redis keys). deploy/nats/permissions.conf grants them; test/nats-subjects.test.ts
// checks that it still does.
//
//   <ns>.events.<coupon>             settlement events, JetStream stream <ns>_settlement (relay → settler)
//   <ns>.levels.<coupon>             "the coupon's level changed" pings between instances (core NATS)
//   <ns>.alerts.low_stock.<coupon>   low-stock events, for instances and observers (core NATS)
//   <ns>.signals.returned.<coupon>   "units came back": drop the sold-out flag (core NATS)
//   <ns>.alerts.sold_out.<coupon>, <ns>.alerts.back_in_stock.<coupon>   stock events, once per crossing (core NATS)
//   <ns>.signals.sale.<coupon>       a coupon's new sale settings (window, pause) with their revision (core NATS)

/** A coupon id as one subject token. Ids may hold `.`, the token separator; `_` is the escape character,
 * so the mapping stays one-to-one (`a.b` → `a_2Eb`, `a_b` → `a_5Fb`). Settlement events are stored in
 * JetStream under these subjects and counted per coupon by them: the escape must never change. */
export function subjectToken(couponId: string): string {
  return couponId.replace(/[_.]/g, (c) => (c === '_' ? '_5F' : '_2E'));
}

export interface NatsSubjects {
  /** Prefix of every settlement event subject (the stream's subjects: `<prefix>.>`). */
  eventsPrefix: string;
  events(couponId: string): string;
  level(couponId: string): string;
  lowStock(couponId: string): string;
  stockReturned(couponId: string): string;
  /** Every coupon's returned-stock signal. */
  stockReturnedAll: string;
  stockEvent(kind: 'sold_out' | 'back_in_stock', couponId: string): string;
  sale(couponId: string): string;
  /** Every coupon's sale signal. */
  saleAll: string;
}

export function natsSubjects(namespace: string): NatsSubjects {
  const eventsPrefix = `${namespace}.events`;
  return {
    eventsPrefix,
    events: (couponId) => `${eventsPrefix}.${subjectToken(couponId)}`,
    level: (couponId) => `${namespace}.levels.${subjectToken(couponId)}`,
    lowStock: (couponId) => `${namespace}.alerts.low_stock.${subjectToken(couponId)}`,
    stockReturned: (couponId) => `${namespace}.signals.returned.${subjectToken(couponId)}`,
    stockReturnedAll: `${namespace}.signals.returned.>`,
    stockEvent: (kind, couponId) => `${namespace}.alerts.${kind}.${subjectToken(couponId)}`,
    sale: (couponId) => `${namespace}.signals.sale.${subjectToken(couponId)}`,
    saleAll: `${namespace}.signals.sale.>`,
  };
}
