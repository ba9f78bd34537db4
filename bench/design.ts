// The common face of everything the benchmark puts under load — the service and each baseline — as seen by
// the orchestrator through the server child's IPC channel.

export interface CouponSpec {
  id: string;
  stock: number;
  shards: number;
}

export interface CouponLevel {
  id: string;
  stock: number;
  /** Units the design's own store says it handed out (its record, not the client's count). */
  sold: number;
  /** Units already settled into MySQL (shardstock only). */
  settled?: number | undefined;
}

/** Sent by a server child once it serves. */
export interface ServerReady {
  type: 'ready';
  port: number;
  pid: number;
}

export interface CpuSample {
  userUs: number;
  systemUs: number;
}
