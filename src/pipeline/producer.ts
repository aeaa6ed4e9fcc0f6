// The bounded in-memory queue between validation and the aggregator. It holds validated rows with
// the UTC day captured at enqueue, so a row that waits across midnight still lands in its day.
// When full, `drop_policy` decides: `block` makes producers wait (asynchronously) for room up to
// a timeout, `drop_newest` refuses the incoming rows, `drop_oldest` evicts the oldest queued rows.

import type { TableName } from '../schema/tables.ts';
import type { RowValues } from '../schema/validate.ts';
import type { DropPolicy } from '../storage/options.ts';

export interface QueuedRow {
  table: TableName;
  day: string;
  /** The normalized row, values in schema column order. */
  values: RowValues;
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
  private readonly ring: Ring<QueuedRow>;
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

  get depth(): number {
    return this.ring.length;
  }

  get capacity(): number {
    return this.limit;
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
    if (this.closed) return 'stopped';
    const n = rows.length;
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
    const day = this.today();
    for (const values of rows) this.ring.push({ table, day, values });
    this.accepted += n;
    this.onEnqueue();
    return 'enqueued';
  }

  private fits(n: number): boolean {
    return this.ring.length + n <= this.limit || (this.ring.length === 0 && this.waiters.length === 0);
  }

  private evictOldest(n: number): void {
    const excess = Math.min(this.ring.length, this.ring.length + n - this.limit);
    for (let i = 0; i < excess; i++) this.ring.shift();
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

  /** Takes up to `max` rows for the aggregator, then wakes producers that now fit (in order). */
  take(max: number): QueuedRow[] {
    const out: QueuedRow[] = [];
    while (out.length < max && this.ring.length > 0) out.push(this.ring.shift()!);
    this.wake();
    return out;
  }

  private wake(): void {
    let free = this.limit - this.ring.length;
    while (this.waiters.length > 0) {
      const w = this.waiters[0];
      if (w.need > free && !(this.ring.length === 0 && w.need > this.limit)) break;
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
    const n = this.ring.length;
    while (this.ring.length > 0) this.ring.shift();
    this.countDropped('stopped_unflushed', n);
    return n;
  }

  stats(): ProducerStats {
    return {
      queue_depth: this.ring.length,
      queue_capacity: this.limit,
      drop_policy: this.policy,
      blocked_producers: this.waiters.length,
      accepted: this.accepted,
      rejected: { ...this.rejected },
      dropped: { ...this.dropped },
    };
  }
}
