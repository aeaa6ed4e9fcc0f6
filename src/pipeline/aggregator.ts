// The aggregator drains the producer queue into one batch per (table, day): rows go into a
// column builder, requests' batches are kept as parts that the writer joins. It hands full or
// old batches to the table writer. A batch is written when it reaches `max_batch_rows`,
// when its oldest row is `max_age_s` old, or, once the queue is drained, when it has at least
// `min_batch_rows` and its table has no write in flight; under light load small batches wait at
// most `max_age_s` for company. Under sustained load files then stay near `min_batch_rows` (a
// small write ends soon), and each file costs ~15 ms of CPU: set it to `max_batch_rows` for
// throughput (5,000-row files vs full batches: 63-71k vs 84-91k spans/s, bench/server-load.ts).
// Rows held here (building or being written) are bounded, so a slow disk fills the queue and
// the producer's drop policy applies: backpressure instead of unbounded memory.

import { BatchBuilder, type Batches, type BatchPart, columnsOf, isIntact } from '../delta/batch.ts';
import { SCHEMAS, TABLE_NAMES, type TableName, type TableSchema } from '../schema/tables.ts';
import type { AggregatorConfig } from '../storage/options.ts';
import type { Producer, Queued } from './producer.ts';

export interface TableWriter {
  /**
   * Writes and commits batches as one file. With `transfer` their buffers move to the writer; a
   * failed write then rejects with an error whose `batch` holds the rows handed back, if it could
   * (a failed commit is retried by the writer with the written file, and comes back without).
   */
  append(batch: Batches, opts?: { transfer?: boolean }): Promise<unknown>;
  close(): Promise<void>;
}

/** Opens (creating if needed) the table of one UTC day. */
export type OpenTable = (table: TableName, day: string) => Promise<TableWriter>;

export interface AggregatorStats {
  pending_rows: Record<TableName, number>;
  writes_in_flight: number;
  batches_written: number;
  rows_written: number;
  /** Rows whose write failed after every retry (see last_error). */
  rows_failed: number;
  last_flush_at: string | null;
  last_error: { at: string; message: string } | null;
}

interface Slot {
  table: TableName;
  day: string;
  /** Rows queued one by one (the library) are built into columns here. */
  builder: BatchBuilder;
  /** Rows that came as batches (the server) are kept as they are: the writer joins them. */
  parts: BatchPart[];
  partRows: number;
  /** When the oldest row of the building batch arrived (clock ms). */
  oldestAt: number;
  /** Rows handed to the writer and not yet committed. */
  writingRows: number;
  writer: Promise<TableWriter> | null;
}

/** Rows of the slot's building batch. */
function size(slot: Slot): number {
  return slot.builder.size + slot.partRows;
}

/** Rows [from, to) of a batch: the batch itself when that is all of it, else a copy. */
function sliceBatch(schema: TableSchema, batch: BatchPart, from: number, to: number): BatchPart {
  if (from === 0 && to === batch.numRows) return batch;
  const names = schema.columns.map((c) => c.name);
  const b = new BatchBuilder(schema, to - from);
  b.appendBatch(columnsOf(batch, names), from, to);
  return b.view(); // the builder is dropped: finish() would only allocate its next batch
}

const MAX_ATTEMPTS = 8;
/** Wait before the second attempt; doubled for each later one (at most 10 s). */
const RETRY_DELAY_MS = 100;
/** Rows moved from the queue into batches per event-loop turn. */
const DRAIN_CHUNK = 2048;

export class Aggregator {
  private readonly slots = new Map<string, Slot>();
  private readonly producer: Producer;
  private readonly cfg: AggregatorConfig;
  private readonly openTable: OpenTable;
  private readonly clock: () => number;
  /** Rows held in builders and in writes, at most; beyond it the queue is left to fill. */
  private readonly holdLimit: number;
  private held = 0;
  private timer: NodeJS.Timeout | null = null;
  private drainScheduled = false;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  private batchesWritten = 0;
  private rowsWritten = 0;
  private rowsFailed = 0;
  private lastFlushAt: number | null = null;
  private lastError: { at: string; message: string } | null = null;

  constructor(producer: Producer, cfg: AggregatorConfig, openTable: OpenTable, clock: () => number) {
    this.producer = producer;
    this.cfg = cfg;
    this.openTable = openTable;
    this.clock = clock;
    this.holdLimit = Math.max(4 * cfg.max_batch_rows, 2 * cfg.min_batch_rows);
    producer.onEnqueue = () => this.scheduleDrain();
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
      this.held++;
      if (size(slot) >= this.cfg.max_batch_rows) this.flush(slot);
      return 1;
    }
    // A batch is split where the building batch reaches max_batch_rows.
    for (let from = q.from; from < q.to; ) {
      if (size(slot) === 0) slot.oldestAt = this.clock();
      const to = Math.min(q.to, from + this.cfg.max_batch_rows - size(slot));
      slot.parts.push(sliceBatch(slot.builder.schema, q.batch, from, to));
      slot.partRows += to - from;
      this.held += to - from;
      from = to;
      if (size(slot) >= this.cfg.max_batch_rows) this.flush(slot);
    }
    return q.to - q.from;
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
        oldestAt: 0,
        writingRows: 0,
        writer: null,
      };
      this.slots.set(key, s);
    }
    return s;
  }

  /**
   * Hands the slot's building batch to its writer. Writes are not chained: the table writes
   * Parquet files in parallel and commits them in call order.
   */
  private flush(slot: Slot): void {
    const n = size(slot);
    if (n === 0) return;
    if (slot.builder.size > 0) slot.parts.push(slot.builder.finish());
    const batch: Batches = slot.parts.length === 1 ? slot.parts[0]! : slot.parts;
    slot.parts = [];
    slot.partRows = 0;
    slot.writingRows += n;
    const write = this.write(slot, batch, n);
    this.inFlight.add(write);
    void write.finally(() => {
      this.inFlight.delete(write);
      slot.writingRows -= n;
      this.held -= n;
      this.scheduleDrain();
    });
  }

  private async write(slot: Slot, batch: Batches, rows: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        slot.writer ??= this.openTable(slot.table, slot.day).catch((err) => {
          slot.writer = null; // open again on the next attempt
          throw err;
        });
        const writer = await slot.writer;
        // Moved to the writer's worker, not copied: a failed append hands the batch back.
        await writer.append(batch, { transfer: true });
        this.batchesWritten++;
        this.rowsWritten += rows;
        this.lastFlushAt = Date.now();
        return;
      } catch (err) {
        this.lastError = {
          at: new Date().toISOString(),
          message: `${slot.table} ${slot.day}: ${(err as Error).message}`,
        };
        const back = (err as { batch?: Batches }).batch;
        if (back) batch = back;
        // Without its batch (a worker that died mid-write, a commit the writer gave up on) there is
        // nothing left to retry.
        if (attempt >= MAX_ATTEMPTS || this.stopped || !isIntact(batch)) {
          this.rowsFailed += rows;
          return;
        }
        await new Promise((r) => setTimeout(r, Math.min(10_000, RETRY_DELAY_MS * 2 ** (attempt - 1))));
      }
    }
  }

  /** Closes the tables of past days once nothing of theirs is pending. */
  private closeIdlePastDays(): void {
    const today = this.producer.today();
    for (const [key, slot] of this.slots) {
      if (slot.day !== today && size(slot) === 0 && slot.writingRows === 0) {
        this.slots.delete(key);
        if (slot.writer) void slot.writer.then((w) => w.close()).catch(() => {});
      }
    }
  }

  /** Drains the queue completely, writes every batch and waits for the writes (stop with flush 'auto'). */
  async flushAll(): Promise<void> {
    for (;;) {
      this.drainAll();
      for (const slot of this.slots.values()) this.flush(slot);
      if (this.inFlight.size === 0 && this.producer.depth === 0) return;
      await Promise.all([...this.inFlight]);
    }
  }

  /** Like drain, but ignores the hold limit: used when stopping. */
  private drainAll(): void {
    for (const q of this.producer.take(Number.POSITIVE_INFINITY)) this.add(q);
  }

  /** Waits for writes already handed to the writers (stop with flush 'none'). */
  async waitForWrites(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Stops the timers and closes every table; call after flushAll or waitForWrites. */
  async close(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.waitForWrites();
    const writers = [...this.slots.values()].map((s) => s.writer).filter((w) => w !== null);
    this.slots.clear();
    await Promise.all(writers.map((w) => w.then((t) => t.close()).catch(() => {})));
  }

  /** Whether rows of `day` are in a batch or in a write not committed yet. */
  holdsDay(day: string): boolean {
    for (const s of this.slots.values()) if (s.day === day && size(s) + s.writingRows > 0) return true;
    return false;
  }

  /** Rows buffered in batches and not yet written, by table. */
  pendingRows(): Record<TableName, number> {
    const out = Object.fromEntries(TABLE_NAMES.map((t) => [t, 0])) as Record<TableName, number>;
    for (const s of this.slots.values()) out[s.table] += size(s) + s.writingRows;
    return out;
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
    };
  }
}
