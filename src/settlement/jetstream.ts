// The settlement stream on JetStream: names derived from the namespace (so test runs and deployments sharing
// one NATS never see each other's events), creating/updating the stream and its durable consumer, and
// reading what is still unsettled for one coupon.
//
// WorkQueue retention: a message leaves the stream when the settler acks it, so the stream holds exactly the
// events not yet settled, and `subjects_filter` counts them per coupon. File storage: a NATS restart must not
// lose an event the relay already deleted from Redis.
import {
  AckPolicy,
  DeliverPolicy,
  RetentionPolicy,
  StorageType,
  nanos,
  type JetStreamManager,
  type MsgRequest,
  type NatsConnection,
  type StoredMsg,
  type StreamInfo,
} from 'nats';
import { natsSubjects } from '../nats/subjects.js';
import { decodeEvent, eventId, type SettlementEvent } from './event.js';

/** JetStream drops a republished event id within this window (it keeps every id seen in it in memory, so a
 * longer window costs server memory at peak rates); the ledger's unique key catches anything older. */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;
/** A delivered message not acked within this long is delivered again (to any settler): how soon a dead
 * settler's messages move on. A live settler keeps its batch's messages with `working()` meanwhile. */
export const ACK_WAIT_MS = 10_000;

export interface SettlementNames {
  stream: string;
  durable: string;
  subjectPrefix: string;
  subject(couponId: string): string;
}

export function settlementNames(namespace: string): SettlementNames {
  const subjects = natsSubjects(namespace);
  return {
    stream: `${namespace}_settlement`,
    durable: `${namespace}_settler`,
    subjectPrefix: subjects.eventsPrefix,
    subject: subjects.events,
  };
}

export interface EnsureOptions {
  /** Largest number of delivered-but-unacked messages across all settlers. */
  maxAckPending: number;
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: string | number; api_error?: { code?: number } };
  return e?.api_error?.code === 404 || String(e?.code) === '404';
}

/** Creates the stream and the durable pull consumer, or brings their settings up to date. */
export async function ensureSettlementStream(nc: NatsConnection, names: SettlementNames, options: EnsureOptions): Promise<void> {
  const jsm = await nc.jetstreamManager();
  const stream = {
    name: names.stream,
    subjects: [`${names.subjectPrefix}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
  };
  try {
    await jsm.streams.info(names.stream);
    await jsm.streams.update(names.stream, stream);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.streams.add(stream);
  }
  const consumer = {
    durable_name: names.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(ACK_WAIT_MS),
    // Redeliveries are bounded by the settler (it knows a poison message from a database outage).
    max_deliver: -1,
    max_ack_pending: options.maxAckPending,
  };
  try {
    await jsm.consumers.info(names.stream, names.durable);
    await jsm.consumers.update(names.stream, names.durable, {
      ack_wait: consumer.ack_wait,
      max_deliver: -1,
      max_ack_pending: options.maxAckPending,
    });
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.consumers.add(names.stream, consumer);
  }
}

/**
 * Creates the stream or its consumer again if either is gone (NATS back on an empty store, the stream deleted):
 * without them every publish fails and the outbox grows until the instance restarts. Returns what was missing.
 * Whatever the lost stream held is gone; Reconcile shows it as drift.
 */
export async function restoreSettlementStream(
  nc: NatsConnection,
  names: SettlementNames,
  options: EnsureOptions,
): Promise<'stream' | 'consumer' | undefined> {
  const jsm = await nc.jetstreamManager();
  const exists = (p: Promise<unknown>) =>
    p.then(
      () => true,
      (err: unknown) => {
        if (isNotFound(err)) return false;
        throw err;
      },
    );
  let missing: 'stream' | 'consumer' | undefined;
  if (!(await exists(jsm.streams.info(names.stream)))) missing = 'stream';
  else if (!(await exists(jsm.consumers.info(names.stream, names.durable)))) missing = 'consumer';
  if (missing) await ensureSettlementStream(nc, names, options);
  return missing;
}

/** Read access to the unsettled messages of the stream. */
export class SettlementStreamReader {
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    readonly names: SettlementNames,
    /** Refuse to scan more messages than this for one coupon (a reload or Reconcile would take too long). */
    private readonly scanLimit = 100_000,
  ) {}

  private manager(): Promise<JetStreamManager> {
    this.jsm ??= this.nc.jetstreamManager().catch((err: unknown) => {
      this.jsm = undefined;
      throw err;
    });
    return this.jsm;
  }

  /** Unsettled messages of one coupon (0 when the stream does not exist yet). */
  async pending(couponId: string): Promise<number> {
    const subject = this.names.subject(couponId);
    try {
      const info = await (await this.manager()).streams.info(this.names.stream, { subjects_filter: subject });
      return info.state.subjects?.[subject] ?? 0;
    } catch (err) {
      if (isNotFound(err)) return 0;
      throw err;
    }
  }

  /** Unsettled messages in the whole stream and the age of the oldest (WorkQueue: the first is the oldest). */
  async total(): Promise<{ messages: number; oldestMs: number }> {
    try {
      const { state } = await (await this.manager()).streams.info(this.names.stream);
      return { messages: state.messages, oldestMs: state.messages > 0 ? Math.max(0, Date.now() - Date.parse(state.first_ts)) : 0 };
    } catch (err) {
      if (isNotFound(err)) return { messages: 0, oldestMs: 0 };
      throw err;
    }
  }

  /** The unsettled events of one coupon, by event id (a message that does not parse is skipped). */
  async events(couponId: string): Promise<Map<string, SettlementEvent>> {
    const out = new Map<string, SettlementEvent>();
    const subject = this.names.subject(couponId);
    const jsm = await this.manager();
    let info: StreamInfo;
    try {
      info = await jsm.streams.info(this.names.stream, { subjects_filter: subject });
    } catch (err) {
      if (isNotFound(err)) return out;
      throw err;
    }
    const count = info.state.subjects?.[subject] ?? 0;
    if (count === 0) return out;
    if (count > this.scanLimit)
      throw new Error(`coupon ${couponId} has ${count} unsettled messages, more than the ${this.scanLimit} one scan may read`);
    const first = info.state.first_seq;
    const last = info.state.last_seq;
    // "Next message on this subject from seq" is one request per message; split the sequence range so
    // segments are read in parallel.
    const segments = Math.max(1, Math.min(32, Math.ceil(count / 64)));
    const width = Math.ceil((last - first + 1) / segments);
    await Promise.all(
      Array.from({ length: segments }, async (_, i) => {
        let seq = first + i * width;
        const end = Math.min(last + 1, seq + width);
        while (seq < end) {
          let m: StoredMsg;
          try {
            // The server's STREAM.MSG.GET takes next_by_subj; the client's type for it lags behind.
            m = await jsm.streams.getMessage(this.names.stream, { next_by_subj: subject, seq } as unknown as MsgRequest);
          } catch (err) {
            if (isNotFound(err)) return;
            throw err;
          }
          if (m.seq >= end) return;
          const e = decodeEvent(m.data);
          if (e) out.set(eventId(e), e);
          seq = m.seq + 1;
        }
      }),
    );
    return out;
  }
}
