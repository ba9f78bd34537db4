// What a baseline has to provide: the few operations the benchmark calls. Each baseline is one file; the
// shared gRPC handlers around them are in handlers.ts.

export type BaselineOutcome = 'deducted' | 'sold_out' | 'insufficient';

export interface BaselineDeduct {
  couponId: string;
  requestId: string;
  userId: string;
  quantity: number;
}

export interface BaselineStore {
  deduct(req: BaselineDeduct): Promise<{ outcome: BaselineOutcome; remaining: number }>;
  create(coupons: { id: string; stock: number }[]): Promise<void>;
  /** Stock it was created with and what is left, read from the store itself. */
  levels(ids: string[]): Promise<{ id: string; stock: number; remaining: number }[]>;
  close(): Promise<void>;
}
