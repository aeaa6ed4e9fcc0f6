// The bounded in-memory queue between validation and the aggregator. It holds validated rows with
// the UTC day captured at enqueue, so a row that waits across midnight still lands in its day.
// Rows come one by one (the library) or as column batches (the server's decode workers); the
// queue's size and every limit count rows either way.
// When full, `drop_policy` decides: `block` makes producers wait (asynchronously) for room up to
// a timeout, `drop_newest` refuses the incoming rows, `drop_oldest` evicts the oldest queued rows.
// With a project share below 1, one project may hold at most that share of the queue (rows waiting
// for room, reserved or queued): beyond it its rows are refused at once, whatever the policy, so
// that one noisy project cannot take the room of the others.

import type { BatchPart } from '../delta/batch.ts';
import type { TableName } from '../schema/tables.ts';
import type { RowValues } from '../schema/validate.ts';
import { utcDay } from '../storage/layout.ts';
import type { DropPolicy } from '../storage/options.ts';

export interface QueuedRow {
  table: TableName;
  day: string;
  /** The normalized row, values in schema column order. */
  values: RowValues;
  batch?: undefined;
  /** The row's sequence number in the write-ahead log (none with durability "memory"). */
  seq?: number | undefined;
  held?: undefined;
}

/** Rows [from, to) of a batch of normalized rows. */
export interface QueuedBatch {
  table: TableName;
  day: string;
  batch: BatchPart;
  from: number;
  to: number;
  /** The write-ahead log's sequence number of the batch's row 0 (none with durability "memory"). */
  seq?: number | undefined;
  /** Rows of a request, by project, held against the project share until this entry leaves the queue. */
  held?: Readonly<Record<string, number>> | undefined;
}

export type Queued = QueuedRow | QueuedBatch;

/** Rows an entry of the queue holds. */
export function queuedRows(q: Queued): number {
  return q.batch === undefined ? 1 : q.to - q.from;
}

/**
 * Room held in the queue for rows about to be queued (a request's rows of every table, waiting
 * for the write-ahead log): counted against the capacity from the moment it is granted, so that
 * concurrent callers can never overfill the queue. `fill` or `cancel` settles it.
 */
export interface Reservation {
  readonly rows: number;
  settled: boolean;
  /** The rows by project, held against the project share (see `reserve`). */
  projects?: Readonly<Record<string, number>> | undefined;
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
/** `project_full`: a project of the rows holds its share of the queue already. */
export type ReserveOutcome = Reservation | 'queue_full' | 'stopped' | 'project_full';

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
  some(test: (x: T) => boolean): boolean {
    for (let i = 0; i < this.length; i++) if (test(this.buf[(this.head + i) % this.buf.length]!)) return true;
    return false;
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

const DAY_MS = 86_400_000;

type Waiter = { need: number; resolve: (ok: boolean) => void; timer: NodeJS.Timeout | null };

export class Producer {
  private readonly ring: Ring<Queued>;
  /** Rows in the ring (a batch entry holds many). */
  private queued = 0;
  /** Rows of reservations not yet filled or cancelled. */
  private reserved = 0;
  private readonly limit: number;
  private readonly waiters: Waiter[] = [];
  private readonly policy: DropPolicy;
  private readonly blockTimeoutMs: number;
  private readonly clock: () => number;
  /** Rows one project may hold (project share x capacity); infinite when the share is 1. */
  private readonly projectLimit: number;
  /** Rows each project holds: waiting for room, reserved or queued (with a project share). */
  private readonly held = new Map<string, number>();
  private closed = false;
  private accepted = 0;
  private readonly rejected: Record<string, number> = {};
  private readonly dropped: Record<string, number> = {};
  /** Called whenever rows were enqueued (the aggregator schedules a drain). */
  onEnqueue: () => void = () => {};
  /** Called for rows evicted by drop_oldest (the write-ahead log lets them go). */
  onEvict: (q: Queued, rows: number) => void = () => {};

  constructor(
    capacity: number,
    policy: DropPolicy,
    blockTimeoutMs: number,
    clock: () => number,
    projectShare = 1,
  ) {
    this.ring = new Ring(Math.min(capacity, 65_536));
    this.limit = capacity;
    this.projectLimit =
      projectShare >= 1 ? Number.POSITIVE_INFINITY : Math.max(1, Math.floor(capacity * projectShare));
    this.policy = policy;
    this.blockTimeoutMs = blockTimeoutMs;
    this.clock = clock;
  }

  /** Rows queued, ready for the aggregator. */
  get depth(): number {
    return this.queued;
  }

  /** Whether rows of `day` or an earlier day are queued. */
  holdsDayOrEarlier(day: string): boolean {
    return this.ring.some((q) => q.day <= day);
  }

  private dayEnd = Number.NEGATIVE_INFINITY;
  private day = '';
  /** Whether the clock is behind the day's start now (told once per time it goes back). */
  private clockBehind = false;
  /** Called when the clock goes back to an earlier day: rows keep their later day. */
  onClockBack: (clockDay: string, day: string) => void = () => {};

  /**
   * The UTC day of now, as captured for rows enqueued now (formatted once per day). It only moves
   * forward: once the shipper may have sealed the day before, a clock set back across midnight (a
   * step of NTP, a virtual machine resumed) must not send rows into it, where a cleanup would drop
   * them. So the day stays until the clock passes its end again.
   */
  today(): string {
    const now = this.clock();
    if (now >= this.dayEnd) {
      const start = now - (((now % DAY_MS) + DAY_MS) % DAY_MS);
      this.dayEnd = start + DAY_MS;
      this.day = utcDay(start);
      this.clockBehind = false;
    } else {
      const behind = now < this.dayEnd - DAY_MS;
      if (behind && !this.clockBehind) this.onClockBack(utcDay(now), this.day);
      this.clockBehind = behind;
    }
    return this.day;
  }

  /** Days up to `day` are sealed (the days index says so at start): rows go to later days only. */
  sealedThrough(day: string): void {
    if (day < this.today()) return;
    const start = Date.parse(`${day}T00:00:00Z`) + DAY_MS;
    this.day = utcDay(start);
    this.dayEnd = start + DAY_MS;
  }

  countRejected(reason: string, n = 1): void {
    this.rejected[reason] = (this.rejected[reason] ?? 0) + n;
  }

  private countDropped(reason: string, n: number): void {
    if (n > 0) this.dropped[reason] = (this.dropped[reason] ?? 0) + n;
  }

  /** Enqueues rows of one table all together or not at all (see `reserve`). */
  async enqueue(
    table: TableName,
    rows: readonly RowValues[],
    waitMs = this.blockTimeoutMs,
  ): Promise<EnqueueOutcome> {
    const res = await this.reserveRoom(rows.length, waitMs, false);
    if (typeof res === 'string') return res;
    const day = this.today();
    this.fill(
      res,
      rows.map((values) => ({ table, day, values })),
    );
    return 'enqueued';
  }

  /** Enqueues the rows of a batch all together or not at all, like `enqueue`. */
  async enqueueBatch(
    table: TableName,
    batch: BatchPart,
    waitMs = this.blockTimeoutMs,
  ): Promise<EnqueueOutcome> {
    const res = await this.reserveRoom(batch.numRows, waitMs, false);
    if (typeof res === 'string') return res;
    this.fill(res, [{ table, day: this.today(), batch, from: 0, to: batch.numRows }]);
    return 'enqueued';
  }

  /**
   * Reserves room for `n` rows as the drop policy says: `block` waits up to `waitMs` for room,
   * `drop_newest` refuses at once, `drop_oldest` evicts the oldest queued rows. The room is
   * counted at once, atomically for concurrent callers. A group larger than the whole queue is
   * let in when the queue is empty, so no request size is refused forever. `mustWait` (replay of
   * the write-ahead log) waits for room whatever the policy, without a time limit.
   * `projects` (the `n` rows by project) holds the rows against the project share from now until
   * they leave the queue; a project that would exceed its share gets `project_full` at once (one
   * that holds nothing is let in with any number of rows, as above).
   */
  async reserve(
    n: number,
    waitMs = this.blockTimeoutMs,
    mustWait = false,
    projects?: Readonly<Record<string, number>>,
  ): Promise<ReserveOutcome> {
    if (projects === undefined || this.projectLimit === Number.POSITIVE_INFINITY || this.closed) {
      return this.reserveRoom(n, waitMs, mustWait);
    }
    for (const [project, rows] of Object.entries(projects)) {
      const held = this.held.get(project) ?? 0;
      if (held > 0 && held + rows > this.projectLimit) {
        this.countDropped('project_queue_share', n);
        return 'project_full';
      }
    }
    this.hold(projects, 1);
    const res = await this.reserveRoom(n, waitMs, mustWait);
    if (typeof res === 'string') this.hold(projects, -1);
    else res.projects = projects;
    return res;
  }

  /** Adds (sign 1) or takes back (-1) rows held by projects. */
  private hold(projects: Readonly<Record<string, number>>, sign: 1 | -1): void {
    for (const [project, rows] of Object.entries(projects)) {
      const held = (this.held.get(project) ?? 0) + sign * rows;
      if (held > 0) this.held.set(project, held);
      else this.held.delete(project);
    }
  }

  /** Rows a project holds in the queue (0 without a project share). */
  heldBy(project: string): number {
    return this.held.get(project) ?? 0;
  }

  private async reserveRoom(
    n: number,
    waitMs: number,
    mustWait: boolean,
  ): Promise<Reservation | 'queue_full' | 'stopped'> {
    if (this.closed) return 'stopped';
    if (!this.fits(n)) {
      if (mustWait || this.policy === 'block') {
        const room = await this.waitForRoom(n, mustWait ? Number.POSITIVE_INFINITY : waitMs);
        if (this.closed) {
          if (room) this.reserved -= n;
          return 'stopped';
        }
        if (!room) {
          this.countDropped('queue_full', n);
          return 'queue_full';
        }
        return { rows: n, settled: false }; // counted by wake()
      }
      if (this.policy === 'drop_oldest') this.evictOldest(n);
      if (!this.fits(n)) {
        this.countDropped(this.policy, n);
        return 'queue_full';
      }
    }
    this.reserved += n;
    return { rows: n, settled: false };
  }

  /**
   * Queues entries in reserved room (of one reservation, or of several callers whose rows were
   * gathered into the entries), oldest first; room they do not use is given back.
   */
  fill(reservations: Reservation | readonly Reservation[], entries: readonly Queued[]): void {
    let room = 0;
    let held: Record<string, number> | undefined;
    const all: readonly Reservation[] = Array.isArray(reservations)
      ? reservations
      : [reservations as Reservation];
    for (const res of all) {
      if (res.settled) throw new Error('reservation already settled');
      res.settled = true;
      room += res.rows;
      if (res.projects) {
        held ??= {};
        for (const [p, rows] of Object.entries(res.projects)) held[p] = (held[p] ?? 0) + rows;
      }
    }
    this.reserved -= room;
    let n = 0;
    let last: QueuedBatch | null = null;
    for (const q of entries) {
      const rows = queuedRows(q);
      if (rows === 0) continue;
      this.ring.push(q);
      n += rows;
      if (q.batch !== undefined) last = q;
    }
    // The rows stay held until the last entry of the request leaves the queue (entries leave in order).
    if (held) {
      if (last) last.held = held;
      else this.hold(held, -1);
    }
    this.queued += n;
    this.accepted += n;
    if (n < room) this.wake();
    if (n > 0) this.onEnqueue();
  }

  /** Gives reserved room back (the rows could not be logged). */
  cancel(res: Reservation): void {
    if (res.settled) return;
    res.settled = true;
    this.reserved -= res.rows;
    if (res.projects) this.hold(res.projects, -1);
    this.wake();
  }

  /** Removes the entry at the head of the queue (its rows no longer count), releasing what it held. */
  private shift(): Queued {
    const q = this.ring.shift()!;
    if (q.held) this.hold(q.held, -1);
    return q;
  }

  /**
   * Whether `n` rows get room now. Never ahead of a producer already waiting: a request larger than
   * the queue (the Collector's 8,192 items against the default 2,048) waits for an empty queue,
   * and smaller ones that fit alongside a steady flow would otherwise keep it from ever emptying.
   */
  private fits(n: number): boolean {
    if (this.waiters.length > 0) return false;
    const used = this.queued + this.reserved;
    return used + n <= this.limit || used === 0;
  }

  private evictOldest(n: number): void {
    const excess = Math.min(this.queued, this.queued + this.reserved + n - this.limit);
    let left = excess;
    while (left > 0) {
      const q = this.ring.peek()!;
      const size = queuedRows(q);
      if (size <= left) {
        this.shift();
        this.onEvict(q, size);
        left -= size;
      } else {
        // The oldest rows of a batch go, the rest stays queued.
        const b = q as QueuedBatch;
        this.onEvict({ ...b, to: b.from + left }, left);
        b.from += left;
        left = 0;
      }
    }
    this.queued -= excess;
    this.countDropped('drop_oldest', excess);
  }

  private waitForRoom(need: number, waitMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      if (!(waitMs > 0)) {
        resolve(false);
        return;
      }
      const w: Waiter = { need, resolve, timer: null };
      if (Number.isFinite(waitMs)) {
        w.timer = setTimeout(() => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          resolve(false);
          this.wake(); // a large waiter that gave up may have held back smaller ones
        }, waitMs);
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
        out.push(this.shift());
        n += size;
      } else {
        const part = cap - n; // the first rows of the batch; the rest stays at the head
        const b = q as QueuedBatch;
        // The part keeps the log position (its rows are released from the log once committed);
        // the project share is let go with the rest.
        out.push({ table: b.table, day: b.day, batch: b.batch, from: b.from, to: b.from + part, seq: b.seq });
        b.from += part;
        n += part;
      }
    }
    this.queued -= n;
    this.wake();
    return out;
  }

  /** Grants room to waiting producers that now fit, in order; their room is counted here. */
  private wake(): void {
    while (this.waiters.length > 0) {
      const w = this.waiters[0]!;
      const used = this.queued + this.reserved;
      if (used + w.need > this.limit && used > 0) break;
      this.waiters.shift();
      if (w.timer) clearTimeout(w.timer);
      this.reserved += w.need;
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
    const n = this.queued;
    while (this.ring.length > 0) this.shift();
    this.queued = 0;
    this.countDropped('stopped_unflushed', n);
    return n;
  }

  stats(): ProducerStats {
    return {
      queue_depth: this.queued + this.reserved,
      queue_capacity: this.limit,
      drop_policy: this.policy,
      blocked_producers: this.waiters.length,
      accepted: this.accepted,
      rejected: { ...this.rejected },
      dropped: { ...this.dropped },
    };
  }
}
