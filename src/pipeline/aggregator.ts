// The aggregator drains the producer queue into one batch per (table, day): rows go into a
// column builder, requests' batches are kept as parts that the writer joins. It cuts a batch when
// it reaches `max_batch_rows` (before a request's rows that would take it past that: a request
// is split, and copied, only where the hold limit falls), when its oldest row is `max_age_s`
// old, or, once the queue is drained, when it has at least `min_batch_rows` and its table has no
// write in flight; under light load small batches wait at most `max_age_s` for company. Cut
// batches wait for their table's next file (FILE_ROWS rows, or half of `max_age_s`) and are
// written together, so under load files follow the rate rows arrive at, not the batch size.
// Files are written in parallel, but a (table, day) commits its batches strictly in the order
// they were cut, each commit recording the write-ahead log position it covers: a batch whose write
// or commit fails is retried with backoff until it lands, holding back the ones after it. Rows
// held here (building or being written) are bounded, so a slow or failing disk fills the queue and
// the producer's drop policy applies: backpressure instead of unbounded memory.

import {
  BatchBuilder,
  type Batches,
  type BatchPart,
  batchBytes,
  batchList,
  isIntact,
  sliceBatch,
} from '../delta/batch.ts';
import type { DataFile, TxnMark } from '../delta/table.ts';
import { SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';
import type { AggregatorConfig } from '../storage/options.ts';
import type { Producer, Queued } from './producer.ts';

export interface TableWriter {
  /**
   * Writes batches as one synced data file, not yet committed (null for no rows). The batches'
   * buffers move to the writer; a failed write rejects with an error whose `batch` holds the
   * rows handed back, if they could be.
   */
  write(batch: Batches): Promise<DataFile | null>;
  /** Commits written files as one version, with the write-ahead log's mark when there is one. */
  commit(files: readonly DataFile[], txn: TxnMark | null): Promise<unknown>;
  /** Deletes a written file that will not be committed. */
  discard(file: DataFile): Promise<void>;
  close(): Promise<void>;
}

/** Opens (creating if needed) the table of one UTC day. */
export type OpenTable = (table: TableName, day: string) => Promise<TableWriter>;

/** What the aggregator needs of the write-ahead log (absent with durability "memory"). */
export interface LogHooks {
  /** Recorded with each commit (a Delta `txn` action) with the sequence number it covers up to. */
  appId: string;
  /** Rows from `seq` are committed (or given up): the log may let them go. */
  release(seq: number, rows: number): void;
  /** Reads rows back from the log, when their batch was lost with a worker that died. */
  read(table: TableName, day: string, ranges: readonly SeqRange[]): Promise<BatchPart[]>;
}

/** Rows `seq` .. `seq + rows - 1` of the write-ahead log. */
export interface SeqRange {
  seq: number;
  rows: number;
}

/** A table whose writes fail: its batches are kept and retried until they land. */
export interface WriteFailure {
  table: TableName;
  day: string;
  since: string;
  attempts: number;
  message: string;
}

export interface AggregatorStats {
  pending_rows: Record<TableName, number>;
  writes_in_flight: number;
  batches_written: number;
  rows_written: number;
  /** Rows given up (a batch lost with its worker, or still failing when the logger stopped): see last_error. */
  rows_failed: number;
  last_flush_at: string | null;
  last_error: { at: string; message: string } | null;
  /** Tables whose writes fail right now, retried with backoff. */
  failing: WriteFailure[];
}

/** Events worth a line in the log: a table's writes started failing, or recovered. */
export type AggregatorEvent =
  | { kind: 'write_failed'; failure: WriteFailure }
  | { kind: 'write_recovered'; table: TableName; day: string; attempts: number };

/** A batch handed to the table writer; a slot commits its tickets strictly in order. */
interface Ticket {
  batch: Batches;
  rows: number;
  /** Where its rows are in the write-ahead log. */
  ranges: SeqRange[];
  /** The file written, once it is. */
  file: DataFile | null;
  /** Given up: its rows are counted as failed and it is skipped. */
  lost: boolean;
  /** Its write has begun (until then it may be joined with the batches cut after it). */
  started: boolean;
  /** Bytes of its batch's buffers. */
  bytes: number;
}

interface Slot {
  table: TableName;
  day: string;
  /** Rows queued one by one (the library) are built into columns here. */
  builder: BatchBuilder;
  /** Rows that came as batches (the server) are kept as they are: the writer joins them. */
  parts: BatchPart[];
  partRows: number;
  /** Where the building batch's rows are in the write-ahead log. */
  ranges: SeqRange[];
  /** When the oldest row of the building batch arrived (clock ms). */
  oldestAt: number;
  /** Batches handed to the writer and not yet committed, oldest first. */
  tickets: Ticket[];
  /** Rows of those batches. */
  writingRows: number;
  /** Writes of its files under way (at most PARALLEL_WRITES). */
  writes: number;
  /** When its last write started (performance.now()), and the timer that starts the next one. */
  lastWriteAt: number;
  paceTimer: NodeJS.Timeout | null;
  committing: boolean;
  writer: Promise<TableWriter> | null;
  failure: WriteFailure | null;
}

/** Rows of the slot's building batch. */
function size(slot: Slot): number {
  return slot.builder.size + slot.partRows;
}

/** Wait before the second attempt of a failed write or commit; doubled for each later one. */
const RETRY_DELAY_MS = 100;
const MAX_RETRY_DELAY_MS = 5000;
/** Rows moved from the queue into batches per event-loop turn. */
const DRAIN_CHUNK = 2048;
/**
 * Files of one (table, day) written at once. Batches cut while both are under way wait, and are
 * then written together as one file: the number of files follows what the writer can do, not the
 * batch size (a file costs 7-8 ms of CPU whatever its rows on a slow day, its commit included).
 */
const PARALLEL_WRITES = 2;
/**
 * Under load a (table, day) starts its next file once FILE_ROWS rows wait for it, or half of
 * max_age_s after its last file started, whichever comes first: the batches cut meanwhile (up
 * to max_batch_rows each, or one request) join into one file and one commit, so files follow the
 * rate at which rows arrive, not the batch size, and each file's fixed cost (7-8 ms of CPU on a
 * slow day) is spread over many rows.
 * With a file every 100 ms instead, metrics at the default options (two tables) were written as
 * files of ~3,300 rows, twice as many, and peaked ~15 MiB higher (docs/benchmarks.md).
 * 8,192 rather than 16,384: a file is one burst of the Parquet worker on one of the two cores,
 * and the requests that come meanwhile wait for the other. At half load (default options, six
 * interleaved pairs of 8 s runs) the p99 of spans over protobuf fell from a median of 21.8 ms to
 * 9.2 and of metric points from 20.1 to 9.8, for a few percent more CPU per item at full load
 * (twice the files there).
 * Half of max_age_s keeps the bound on a row's wait while a write lane is free: the file before
 * the row's batch started at most that long after the row arrived, so the row's own file starts
 * at most max_age_s after it arrived.
 */
export const FILE_ROWS = 8_192;
/**
 * Most rows (one Parquet row group), and bytes, of waiting batches joined into one file: the
 * Parquet worker holds a file's rows two or three times over while it writes them.
 */
const JOIN_MAX_ROWS = 131_072;
const JOIN_MAX_BYTES = 16 * 1024 * 1024;

/** Rows of the slot's tickets from `first` on (those not started). */
function waitingRows(slot: Slot, first: number): number {
  let rows = 0;
  for (let i = first; i < slot.tickets.length; i++) rows += slot.tickets[i]!.rows;
  return rows;
}

/** Appends a range, merged with the last one when they touch. */
function addRange(ranges: SeqRange[], seq: number, rows: number): void {
  const last = ranges.at(-1);
  if (last && last.seq + last.rows === seq) last.rows += rows;
  else ranges.push({ seq, rows });
}

/** Consecutive waiting tickets as one: their batches written one after another into one file. */
function joinTickets(tickets: readonly Ticket[]): Ticket {
  if (tickets.length === 1) return tickets[0]!;
  const ranges: SeqRange[] = [];
  for (const t of tickets) for (const r of t.ranges) addRange(ranges, r.seq, r.rows);
  return {
    batch: tickets.flatMap((t) => batchList(t.batch)),
    rows: tickets.reduce((n, t) => n + t.rows, 0),
    ranges,
    file: null,
    lost: false,
    started: false,
    bytes: tickets.reduce((n, t) => n + t.bytes, 0),
  };
}

export interface AggregatorInit {
  producer: Producer;
  cfg: AggregatorConfig;
  openTable: OpenTable;
  clock: () => number;
  /** The write-ahead log, with durability "wal". */
  log?: LogHooks | null;
  /** Failures and recoveries, for the server's log. */
  onEvent?: (e: AggregatorEvent) => void;
}

export class Aggregator {
  private readonly slots = new Map<string, Slot>();
  private readonly producer: Producer;
  private readonly cfg: AggregatorConfig;
  private readonly openTable: OpenTable;
  private readonly clock: () => number;
  private readonly log: LogHooks | null;
  private readonly onEvent: (e: AggregatorEvent) => void;
  /** Rows held in builders and in writes, at most (max_pending_rows); beyond it the queue fills. */
  private readonly holdLimit: number;
  private held = 0;
  /** Most time a slot waits for FILE_ROWS rows after starting a file (see FILE_ROWS); 0 when stopping. */
  private writeIntervalMs: number;
  private timer: NodeJS.Timeout | null = null;
  private drainScheduled = false;
  private stopped = false;
  /** Resolves when the aggregator stops: retries waiting for their next attempt give up. */
  private readonly stopSignal: Promise<void>;
  private signalStop: () => void = () => {};
  private readonly inFlight = new Set<Promise<void>>();
  private batchesWritten = 0;
  private rowsWritten = 0;
  private rowsFailed = 0;
  private lastFlushAt: number | null = null;
  private lastError: { at: string; message: string } | null = null;

  constructor(init: AggregatorInit) {
    this.producer = init.producer;
    this.cfg = init.cfg;
    this.openTable = init.openTable;
    this.clock = init.clock;
    this.log = init.log ?? null;
    this.onEvent = init.onEvent ?? (() => {});
    // A batch must be able to fill.
    this.holdLimit = Math.max(this.cfg.max_pending_rows, this.cfg.max_batch_rows);
    this.writeIntervalMs = (this.cfg.max_age_s * 1000) / 2;
    this.stopSignal = new Promise((resolve) => {
      this.signalStop = resolve;
    });
    this.producer.onEnqueue = () => this.scheduleDrain();
  }

  /** Starts the age timer; draining starts with the first enqueued row. */
  start(): void {
    if (this.timer || this.stopped) return;
    const tickMs = Math.max(10, Math.min(250, (this.cfg.max_age_s * 1000) / 4));
    this.timer = setInterval(() => this.onTick(), tickMs);
    this.timer.unref();
    this.scheduleDrain();
  }

  private scheduleDrain(): void {
    if (this.drainScheduled || this.stopped || !this.timer) return;
    this.drainScheduled = true;
    setImmediate(() => {
      this.drainScheduled = false;
      this.drain();
    });
  }

  /**
   * Moves queued rows into batches while the hold limit allows, about DRAIN_CHUNK rows per
   * event-loop turn so that a deep queue never stalls the loop. The turn's budget ends on a whole
   * request's batch (no copy); only the hold limit splits one.
   */
  private drain(): void {
    let budget = DRAIN_CHUNK;
    while (budget > 0 && this.held < this.holdLimit && this.producer.depth > 0) {
      const room = this.holdLimit - this.held;
      for (const q of this.producer.take(Math.min(room, budget), room)) budget -= this.add(q);
    }
    if (this.producer.depth > 0) {
      if (this.held < this.holdLimit) this.scheduleDrain();
      return;
    }
    for (const slot of this.slots.values()) {
      if (size(slot) >= this.cfg.min_batch_rows && slot.writingRows === 0) this.flush(slot);
    }
  }

  /** Moves a queue entry into its slot's batch; returns the rows it held. */
  private add(q: Queued): number {
    const slot = this.slot(q.table, q.day);
    if (q.batch === undefined) {
      if (size(slot) === 0) slot.oldestAt = this.clock();
      slot.builder.pushValues(q.values);
      if (q.seq !== undefined) addRange(slot.ranges, q.seq, 1);
      this.held++;
      if (size(slot) >= this.cfg.max_batch_rows) this.flush(slot);
      return 1;
    }
    // A request's rows stay together, never copied into two batches: the building batch is cut
    // first when they would take it past max_batch_rows, and a request of more rows than that is
    // a batch of its own. (Splitting an 8,192-row request into 1,000-row copies took 4-15 ms of
    // the event loop on a 2-core machine.) Only the hold limit splits one (producer.take), which
    // copies.
    const rows = q.to - q.from;
    if (size(slot) > 0 && size(slot) + rows > this.cfg.max_batch_rows) this.flush(slot);
    if (size(slot) === 0) slot.oldestAt = this.clock();
    slot.parts.push(sliceBatch(slot.builder.schema, q.batch, q.from, q.to));
    if (q.seq !== undefined) addRange(slot.ranges, q.seq + q.from, rows);
    slot.partRows += rows;
    this.held += rows;
    if (size(slot) >= this.cfg.max_batch_rows) this.flush(slot);
    return rows;
  }

  private onTick(): void {
    const now = this.clock();
    const maxAgeMs = this.cfg.max_age_s * 1000;
    for (const slot of this.slots.values()) {
      if (size(slot) > 0 && now - slot.oldestAt >= maxAgeMs) this.flush(slot);
    }
    this.closeIdlePastDays();
    if (this.producer.depth > 0) this.drain();
  }

  private slot(table: TableName, day: string): Slot {
    const key = `${table}/${day}`;
    let s = this.slots.get(key);
    if (!s) {
      s = {
        table,
        day,
        builder: new BatchBuilder(SCHEMAS[table], Math.min(this.cfg.max_batch_rows, 4096)),
        parts: [],
        partRows: 0,
        ranges: [],
        oldestAt: 0,
        tickets: [],
        writingRows: 0,
        writes: 0,
        lastWriteAt: Number.NEGATIVE_INFINITY,
        paceTimer: null,
        committing: false,
        writer: null,
        failure: null,
      };
      this.slots.set(key, s);
    }
    return s;
  }

  /**
   * Cuts the slot's building batch and hands it to the writer. Files are written in parallel (at
   * most PARALLEL_WRITES per table and day; batches cut meanwhile are joined into the next file);
   * commits land in the order the batches were cut (a write-ahead log position covers everything
   * before it), so a failed write holds back the commits after it until it is retried.
   */
  private flush(slot: Slot): void {
    const n = size(slot);
    if (n === 0) return;
    if (slot.builder.size > 0) slot.parts.push(slot.builder.finish());
    const batch = slot.parts.length === 1 ? slot.parts[0]! : slot.parts;
    slot.tickets.push({
      batch,
      rows: n,
      ranges: slot.ranges,
      file: null,
      lost: false,
      started: false,
      bytes: batchBytes(batch),
    });
    slot.parts = [];
    slot.partRows = 0;
    slot.ranges = [];
    slot.writingRows += n;
    this.startWrites(slot);
  }

  /** Starts writing the waiting batches of a slot, joined into as few files as allowed. */
  private startWrites(slot: Slot): void {
    while (slot.writes < PARALLEL_WRITES) {
      // Waiting tickets are the last ones: tickets start in the order they were cut.
      const first = slot.tickets.findIndex((t) => !t.started);
      if (first < 0) return;
      // Real time, not the logger's clock: pacing is about the CPU a file costs.
      const wait = slot.lastWriteAt + this.writeIntervalMs - performance.now();
      if (wait > 0 && waitingRows(slot, first) < FILE_ROWS) {
        slot.paceTimer ??= setTimeout(() => {
          slot.paceTimer = null;
          this.startWrites(slot);
        }, wait);
        return;
      }
      slot.lastWriteAt = performance.now();
      let end = first + 1;
      let rows = slot.tickets[first]!.rows;
      let bytes = slot.tickets[first]!.bytes;
      for (; end < slot.tickets.length; end++) {
        const next = slot.tickets[end]!;
        if (rows + next.rows > JOIN_MAX_ROWS || bytes + next.bytes > JOIN_MAX_BYTES) break;
        rows += next.rows;
        bytes += next.bytes;
      }
      const ticket = joinTickets(slot.tickets.slice(first, end));
      slot.tickets.splice(first, end - first, ticket);
      ticket.started = true;
      slot.writes++;
      const work = this.write(slot, ticket).then(() => {
        slot.writes--;
        this.startWrites(slot);
        return this.commitReady(slot);
      });
      this.inFlight.add(work);
      void work.finally(() => {
        this.inFlight.delete(work);
        this.scheduleDrain();
      });
    }
  }

  /**
   * Writes a ticket's file, retrying with backoff until it is written or the aggregator stops. A
   * batch lost with a worker that died is read back from the write-ahead log; without one
   * (durability "memory") its rows are gone, counted as failed.
   */
  private async write(slot: Slot, ticket: Ticket): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        if (!isIntact(ticket.batch)) ticket.batch = await this.readBack(slot, ticket);
        slot.writer ??= this.openTable(slot.table, slot.day).catch((err) => {
          slot.writer = null; // open again on the next attempt
          throw err;
        });
        // The batch moves to the writer's worker, not copied: a failed write hands it back.
        ticket.file = await (await slot.writer).write(ticket.batch);
        return;
      } catch (err) {
        const back = (err as { batch?: Batches }).batch;
        if (back) ticket.batch = back;
        this.failed(slot, err, attempt);
        if (!isIntact(ticket.batch) && !this.log) {
          ticket.lost = true;
          return;
        }
        await this.pause(attempt);
      }
    }
  }

  private async readBack(slot: Slot, ticket: Ticket): Promise<Batches> {
    const parts = await this.log!.read(slot.table, slot.day, ticket.ranges);
    return parts.length === 1 ? parts[0]! : parts;
  }

  /** Commits the written tickets at the head of the slot, in order, as one commit. */
  private async commitReady(slot: Slot): Promise<void> {
    if (slot.committing) return;
    slot.committing = true;
    try {
      for (;;) {
        while (slot.tickets[0]?.lost) this.settle(slot, slot.tickets.shift()!, false);
        let n = 0;
        while (n < slot.tickets.length && slot.tickets[n]!.file !== null) n++;
        if (n === 0) return;
        const ready = slot.tickets.slice(0, n);
        const files = ready.map((t) => t.file!);
        const last = ready.at(-1)!.ranges.at(-1);
        const txn = this.log && last ? { appId: this.log.appId, version: last.seq + last.rows } : null;
        for (let attempt = 1; ; attempt++) {
          if (this.stopped) return; // close() settles what is left
          try {
            await (await slot.writer!).commit(files, txn);
            break;
          } catch (err) {
            this.failed(slot, err, attempt);
            await this.pause(attempt);
          }
        }
        for (const t of slot.tickets.splice(0, n)) this.settle(slot, t, true);
        this.recovered(slot);
      }
    } finally {
      slot.committing = false;
    }
  }

  /** A ticket leaves its slot: committed, or given up (its rows counted as failed). */
  private settle(slot: Slot, ticket: Ticket, committed: boolean): void {
    slot.writingRows -= ticket.rows;
    this.held -= ticket.rows;
    if (committed) {
      this.batchesWritten++;
      this.rowsWritten += ticket.rows;
      this.lastFlushAt = Date.now();
      for (const r of ticket.ranges) this.log?.release(r.seq, r.rows);
    } else if (!this.log) {
      // Without a log the rows are gone; with one, they stay in it and are written after a restart.
      this.rowsFailed += ticket.rows;
    }
  }

  private failed(slot: Slot, err: unknown, attempts: number): void {
    const message = `${slot.table} ${slot.day}: ${(err as Error).message}`;
    this.lastError = { at: new Date().toISOString(), message };
    const first = slot.failure === null;
    slot.failure ??= { table: slot.table, day: slot.day, since: this.lastError.at, attempts: 0, message };
    slot.failure.attempts = Math.max(slot.failure.attempts + 1, attempts);
    slot.failure.message = message;
    if (first) this.onEvent({ kind: 'write_failed', failure: { ...slot.failure } });
  }

  private recovered(slot: Slot): void {
    if (slot.failure === null) return;
    if (slot.tickets.some((t) => t.file === null && !t.lost)) return; // a write is still failing
    const { attempts } = slot.failure;
    slot.failure = null;
    this.onEvent({ kind: 'write_recovered', table: slot.table, day: slot.day, attempts });
  }

  /** Waits before the next attempt (100 ms, doubling, at most 5 s); cut short by stop. */
  private async pause(attempt: number): Promise<void> {
    const ms = Math.min(MAX_RETRY_DELAY_MS, RETRY_DELAY_MS * 2 ** (attempt - 1));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise((r) => {
        timer = setTimeout(r, ms);
      }),
      this.stopSignal,
    ]);
    clearTimeout(timer);
  }

  /** The first failing write of `table` (any day), or null. */
  failure(table: TableName): WriteFailure | null {
    for (const s of this.slots.values()) if (s.table === table && s.failure) return s.failure;
    return null;
  }

  /** Closes the tables of past days once nothing of theirs is pending. */
  private closeIdlePastDays(): void {
    const today = this.producer.today();
    for (const [key, slot] of this.slots) {
      if (slot.day !== today && size(slot) === 0 && slot.tickets.length === 0) {
        this.slots.delete(key);
        if (slot.writer) void slot.writer.then((w) => w.close()).catch(() => {});
      }
    }
  }

  /** Drains the queue completely, writes every batch and waits for the writes (stop with flush 'auto'). */
  async flushAll(): Promise<void> {
    this.unpace();
    for (;;) {
      this.drainAll();
      for (const slot of this.slots.values()) this.flush(slot);
      if (this.inFlight.size === 0 && this.producer.depth === 0) return;
      await Promise.all([...this.inFlight]);
    }
  }

  /** Stopping: batches waiting for their slot's next write interval are written now. */
  private unpace(): void {
    this.writeIntervalMs = 0;
    for (const slot of this.slots.values()) {
      if (slot.paceTimer) clearTimeout(slot.paceTimer);
      slot.paceTimer = null;
      this.startWrites(slot);
    }
  }

  /** Like drain, but ignores the hold limit: used when stopping. */
  private drainAll(): void {
    for (const q of this.producer.take(Number.POSITIVE_INFINITY)) this.add(q);
  }

  /** Waits for writes already handed to the writers (stop with flush 'none'). */
  async waitForWrites(): Promise<void> {
    this.unpace();
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /**
   * Stops the timers, gives up writes still failing (their rows stay in the write-ahead log, if
   * there is one) and closes every table; call after flushAll or waitForWrites.
   */
  async close(): Promise<void> {
    this.stopped = true;
    this.signalStop();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.waitForWrites();
    // Batches still failing are given up: their files are deleted, their rows counted as failed
    // (with a write-ahead log they stay in it and are written after the next start).
    for (const slot of this.slots.values()) {
      const writer = slot.writer ? await slot.writer.catch(() => null) : null;
      for (const t of slot.tickets.splice(0)) {
        if (t.file && writer) await writer.discard(t.file).catch(() => {});
        this.settle(slot, t, false);
      }
    }
    const writers = [...this.slots.values()].map((s) => s.writer).filter((w) => w !== null);
    this.slots.clear();
    await Promise.all(writers.map((w) => w.then((t) => t.close()).catch(() => {})));
  }

  /** Rows buffered in batches and not yet written, by table. */
  pendingRows(): Record<TableName, number> {
    const out = Object.fromEntries(TABLE_NAMES.map((t) => [t, 0])) as Record<TableName, number>;
    for (const s of this.slots.values()) out[s.table] += size(s) + s.writingRows;
    return out;
  }

  /** Rows of `day` held here (building or being written). */
  pendingRowsOf(day: string): number {
    let n = 0;
    for (const s of this.slots.values()) if (s.day === day) n += size(s) + s.writingRows;
    return n;
  }

  stats(): AggregatorStats {
    return {
      pending_rows: this.pendingRows(),
      writes_in_flight: this.inFlight.size,
      batches_written: this.batchesWritten,
      rows_written: this.rowsWritten,
      rows_failed: this.rowsFailed,
      last_flush_at: this.lastFlushAt === null ? null : new Date(this.lastFlushAt).toISOString(),
      last_error: this.lastError,
      failing: [...this.slots.values()].flatMap((s) => (s.failure ? [{ ...s.failure }] : [])),
    };
  }
}
