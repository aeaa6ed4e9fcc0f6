// The bounded in-memory queue between validation and the aggregator. It holds validated rows with
// the UTC day captured at enqueue, so a row that waits across midnight still lands in its day.
// Rows come one by one (the library) or as column batches (the server's decode workers); the
// queue's size and every limit count rows either way.
// When full, `drop_policy` decides: `block` makes producers wait (asynchronously) for room up to
// a timeout, `drop_newest` refuses the incoming rows, `drop_oldest` evicts the oldest queued rows.

import type { BatchPart } from '../delta/batch.ts';
import type { TableName } from '../schema/tables.ts';
import type { RowValues } from '../schema/validate.ts';
import type { DropPolicy } from '../storage/options.ts';

export interface QueuedRow {
  table: TableName;
  day: string;
  /** The normalized row, values in schema column order. */
  values: RowValues;
  batch?: undefined;
}

/** Rows [from, to) of a batch of normalized rows. */
export interface QueuedBatch {
  table: TableName;
  day: string;
  batch: BatchPart;
  from: number;
  to: number;
}

export type Queued = QueuedRow | QueuedBatch;

/** Rows an entry of the queue holds. */
function queuedRows(q: Queued): number {
  return q.batch === undefined ? 1 : q.to - q.from;
}

export interface ProducerStats {
  queue_depth: number;
  queue_capacity: number;
  drop_policy: DropPolicy;
  /** Producers currently waiting for room (drop_policy block). */
  blocked_producers: number;
  accepted: number;
  rejected: Record<string, number>;
  dropped: Record<string, number>;
}

export type EnqueueOutcome = 'enqueued' | 'queue_full' | 'stopped';

/** A FIFO ring buffer; it grows only when a single oversized group is let in. */
class Ring<T> {
  private buf: (T | undefined)[];
  private head = 0;
  length = 0;
  constructor(initial: number) {
    this.buf = new Array(Math.max(16, initial));
  }
  push(x: T): void {
    if (this.length === this.buf.length) this.grow();
    this.buf[(this.head + this.length) % this.buf.length] = x;
    this.length++;
  }
  peek(): T | undefined {
    return this.length === 0 ? undefined : this.buf[this.head];
  }
  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const x = this.buf[this.head];
    this.buf[this.head] = undefined;
    this.head = (this.head + 1) % this.buf.length;
    this.length--;
    return x;
  }
  private grow(): void {
    const next: (T | undefined)[] = new Array(this.buf.length * 2);
    for (let i = 0; i < this.length; i++) next[i] = this.buf[(this.head + i) % this.buf.length];
    this.buf = next;
    this.head = 0;
  }
}

type Waiter = { need: number; resolve: (ok: boolean) => void; timer: NodeJS.Timeout | null };

export class Producer {
  private readonly ring: Ring<Queued>;
  /** Rows in the ring (a batch entry holds many). */
  private rows = 0;
  private readonly limit: number;
  private readonly waiters: Waiter[] = [];
  private readonly policy: DropPolicy;
  private readonly blockTimeoutMs: number;
  private readonly clock: () => number;
  private closed = false;
  private accepted = 0;
  private readonly rejected: Record<string, number> = {};
  private readonly dropped: Record<string, number> = {};
  /** Called whenever rows were enqueued (the aggregator schedules a drain). */
  onEnqueue: () => void = () => {};

  constructor(capacity: number, policy: DropPolicy, blockTimeoutMs: number, clock: () => number) {
    this.ring = new Ring(Math.min(capacity, 65_536));
    this.limit = capacity;
    this.policy = policy;
    this.blockTimeoutMs = blockTimeoutMs;
    this.clock = clock;
  }

  /** Rows queued. */
  get depth(): number {
    return this.rows;
  }

  /**
   * The UTC day of the oldest queued row, null when the queue is empty. Days are captured at
   * enqueue, so the queue holds no row of a day before this one.
   */
  oldestQueuedDay(): string | null {
    return this.ring.peek()?.day ?? null;
  }

  private dayStart = 0;
  private dayEnd = 0;
  private day = '';

  /** The UTC day of now, as captured for rows enqueued now (formatted once per day). */
  today(): string {
    const now = this.clock();
    if (now < this.dayStart || now >= this.dayEnd) {
      this.dayStart = now - (((now % 86_400_000) + 86_400_000) % 86_400_000);
      this.dayEnd = this.dayStart + 86_400_000;
      this.day = new Date(this.dayStart).toISOString().slice(0, 10);
    }
    return this.day;
  }

  countRejected(reason: string, n = 1): void {
    this.rejected[reason] = (this.rejected[reason] ?? 0) + n;
  }

  private countDropped(reason: string, n: number): void {
    if (n > 0) this.dropped[reason] = (this.dropped[reason] ?? 0) + n;
  }

  /**
   * Enqueues rows of one table all together or not at all (a request retried after `queue_full`
   * is then not half stored twice). A group larger than the whole queue is taken when the queue
   * is empty, so no request size is refused forever.
   */
  async enqueue(
    table: TableName,
    rows: readonly RowValues[],
    waitMs = this.blockTimeoutMs,
  ): Promise<EnqueueOutcome> {
    const outcome = await this.admit(rows.length, waitMs);
    if (outcome !== 'enqueued' || rows.length === 0) return outcome;
    const day = this.today();
    for (const values of rows) this.ring.push({ table, day, values });
    this.added(rows.length);
    return 'enqueued';
  }

  /** Enqueues the rows of a batch all together or not at all, like `enqueue`. */
  async enqueueBatch(
    table: TableName,
    batch: BatchPart,
    waitMs = this.blockTimeoutMs,
  ): Promise<EnqueueOutcome> {
    const outcome = await this.admit(batch.numRows, waitMs);
    if (outcome !== 'enqueued' || batch.numRows === 0) return outcome;
    this.ring.push({ table, day: this.today(), batch, from: 0, to: batch.numRows });
    this.added(batch.numRows);
    return 'enqueued';
  }

  private added(n: number): void {
    this.rows += n;
    this.accepted += n;
    this.onEnqueue();
  }

  /** Makes room for `n` rows as the drop policy says; 'enqueued' means they may be pushed now. */
  private async admit(n: number, waitMs: number): Promise<EnqueueOutcome> {
    if (this.closed) return 'stopped';
    if (n === 0) return 'enqueued';
    if (!this.fits(n)) {
      if (this.policy === 'drop_newest') {
        this.countDropped('drop_newest', n);
        return 'queue_full';
      }
      if (this.policy === 'drop_oldest') {
        this.evictOldest(n);
      } else {
        const room = await this.waitForRoom(n, waitMs);
        if (this.closed) return 'stopped';
        if (!room) {
          this.countDropped('queue_full', n);
          return 'queue_full';
        }
      }
    }
    return 'enqueued';
  }

  private fits(n: number): boolean {
    return this.rows + n <= this.limit || (this.rows === 0 && this.waiters.length === 0);
  }

  private evictOldest(n: number): void {
    const excess = Math.min(this.rows, this.rows + n - this.limit);
    let left = excess;
    while (left > 0) {
      const q = this.ring.peek()!;
      const size = queuedRows(q);
      if (size <= left) {
        this.ring.shift();
        left -= size;
      } else {
        (q as QueuedBatch).from += left; // the oldest rows of a batch go, the rest stays queued
        left = 0;
      }
    }
    this.rows -= excess;
    this.countDropped('drop_oldest', excess);
  }

  private waitForRoom(need: number, waitMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const w: Waiter = { need, resolve, timer: null };
      if (waitMs > 0 && Number.isFinite(waitMs)) {
        w.timer = setTimeout(() => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          resolve(false);
        }, waitMs);
      } else if (waitMs <= 0) {
        resolve(false);
        return;
      }
      this.waiters.push(w);
    });
  }

  /**
   * Takes up to `max` rows for the aggregator, then wakes producers that now fit (in order). An
   * entry that crosses `max` is taken whole while that stays within `room` (cutting a batch
   * copies both halves); beyond `room` the batch is split there.
   */
  take(max: number, room = max): Queued[] {
    const out: Queued[] = [];
    const cap = Math.max(max, room);
    let n = 0;
    while (n < max && this.ring.length > 0) {
      const q = this.ring.peek()!;
      const size = queuedRows(q);
      if (n + size <= cap) {
        out.push(this.ring.shift()!);
        n += size;
      } else {
        const part = cap - n; // the first rows of the batch; the rest stays at the head
        const b = q as QueuedBatch;
        out.push({ table: b.table, day: b.day, batch: b.batch, from: b.from, to: b.from + part });
        b.from += part;
        n += part;
      }
    }
    this.rows -= n;
    this.wake();
    return out;
  }

  private wake(): void {
    let free = this.limit - this.rows;
    while (this.waiters.length > 0) {
      const w = this.waiters[0];
      if (w.need > free && !(this.rows === 0 && w.need > this.limit)) break;
      this.waiters.shift();
      if (w.timer) clearTimeout(w.timer);
      free -= w.need;
      w.resolve(true);
    }
  }

  /** Refuses further rows and releases every waiting producer (they get 'stopped'). */
  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) {
      if (w.timer) clearTimeout(w.timer);
      w.resolve(false);
    }
  }

  /** Empties the queue without writing it (stop with flush 'none'); returns how many rows were dropped. */
  discard(): number {
    const n = this.rows;
    while (this.ring.length > 0) this.ring.shift();
    this.rows = 0;
    this.countDropped('stopped_unflushed', n);
    return n;
  }

  stats(): ProducerStats {
    return {
      queue_depth: this.rows,
      queue_capacity: this.limit,
      drop_policy: this.policy,
      blocked_producers: this.waiters.length,
      accepted: this.accepted,
      rejected: { ...this.rejected },
      dropped: { ...this.dropped },
    };
  }
}
