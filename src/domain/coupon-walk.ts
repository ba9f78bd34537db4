// A slow walk over every coupon in MySQL, one page per step, starting over after the last: for backstops that
// must reach coupons no call has brought to this instance (a fresh instance, a coupon nobody calls any more),
// which the catalog's in-memory list of served coupons does not hold.
import type { Coupon, CouponRepository } from './ports.js';

export class CouponWalk {
  private cursor = '';

  constructor(
    private readonly repo: Pick<CouponRepository, 'page'>,
    private readonly pageSize: number,
  ) {}

  async next(): Promise<Coupon[]> {
    const page = await this.repo.page(this.cursor, this.pageSize);
    this.cursor = page.length < this.pageSize ? '' : page[page.length - 1]!.id;
    return page;
  }
}

/** Coupons by id, each once (a served coupon may also be on the walk's page). */
export function eachOnce(...lists: Coupon[][]): Coupon[] {
  const byId = new Map<string, Coupon>();
  for (const list of lists) for (const c of list) if (!byId.has(c.id)) byId.set(c.id, c);
  return [...byId.values()];
}
