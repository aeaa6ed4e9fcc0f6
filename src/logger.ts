// The in-process library: one Logger per instance. It prepares the instance (options, index,
// today's six tables), validates rows, queues them, and runs the aggregator that writes Delta
// tables. The HTTP server is a second front door onto the same Logger.

import { mkdir } from 'node:fs/promises';
import type { LazyDataFrame } from 'nodejs-polars';
import type { BatchPart } from './delta/batch.ts';
import { DeltaTable } from './delta/table.ts';
import { Aggregator, type AggregatorStats, type TableWriter } from './pipeline/aggregator.ts';
import { type EnqueueOutcome, Producer, type ProducerStats } from './pipeline/producer.ts';
import { type ReadQuery, readTable } from './read/query.ts';
import { type Row, SCHEMAS, TABLE_NAMES, type TableName } from './schema/tables.ts';
import {
  RowNormalizer,
  type RowValues,
  type ValidationSettings,
  validationSettings,
} from './schema/validate.ts';
import { appendDayPhase, readDayPhases } from './storage/days-index.ts';
import { DEFAULT_DIR, DEFAULT_INSTANCE_ID, InstanceLayout } from './storage/layout.ts';
import {
  deltaOptions,
  type LoggerOptions,
  type PartialOptions,
  resolveOptions,
  saveOptions,
} from './storage/options.ts';

/** S3-compatible storage settings (shipping arrives with its own issue; kept for the API). */
export interface S3Config {
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  region?: string;
  endpointUrl?: string;
  prefix?: string;
  sessionToken?: string;
}

export interface LoggerInit {
  instanceId?: string;
  instanceDir?: string;
  options?: PartialOptions;
  s3?: S3Config;
  /** Milliseconds since the epoch; injectable for tests (day boundaries, batch ages). */
  clock?: () => number;
  /**
   * Runtime override, not persisted: false leaves SIGTERM/SIGINT alone even when
   * `install_signal_handlers` is on (the server installs its own, which stop this logger).
   */
  handleSignals?: boolean;
}

export type IngestTuple = [ok: boolean, reason: string | null];

export interface IngestResult {
  accepted: number;
  /** Rows refused by validation. */
  rejected: number;
  /** Rows refused or evicted by the queue policy. */
  dropped: number;
  /** True when the rows were not queued because the queue stayed full. */
  queueFull: boolean;
  /** The first validation failure, for error messages. */
  firstError: string | null;
  /** Rejections by reason. */
  reasons: Record<string, number>;
}

export interface LoggerStats {
  producer: ProducerStats;
  aggregator: AggregatorStats;
  shipper: { enabled: boolean; configured: boolean; state: string };
}

export type FlushMode = 'auto' | 'none';

type State = 'created' | 'running' | 'stopping' | 'stopped';

const OK: IngestTuple = Object.freeze([true, null]) as unknown as IngestTuple;

/** How long `stop({ flush: 'auto' })` may take to write what is pending. */
const STOP_FLUSH_TIMEOUT_MS = 30_000;

/** An ingest result with nothing counted yet. */
function emptyResult(): IngestResult {
  return { accepted: 0, rejected: 0, dropped: 0, queueFull: false, firstError: null, reasons: {} };
}

/** The result once `n` valid rows were offered to the queue with this outcome. */
function settled(result: IngestResult, outcome: EnqueueOutcome, n: number): IngestResult {
  if (outcome === 'enqueued') result.accepted = n;
  else {
    result.dropped = n;
    result.queueFull = true;
  }
  return result;
}

export class Logger {
  readonly layout: InstanceLayout;
  /** Resolves when the instance is prepared (and, with auto_start, started). */
  readonly ready: Promise<void>;
  private opts: LoggerOptions | null = null;
  private producer: Producer | null = null;
  private aggregator: Aggregator | null = null;
  private normalizers: Record<TableName, RowNormalizer> | null = null;
  private readonly tables = new Map<string, Promise<DeltaTable>>();
  private readonly clock: () => number;
  private readonly init: LoggerInit;
  private state: State = 'created';
  private stopping: Promise<void> | null = null;
  private readonly openedDays = new Set<string>();
  private removeHooks: (() => void) | null = null;

  constructor(init: LoggerInit = {}) {
    this.init = init;
    this.clock = init.clock ?? Date.now;
    this.layout = new InstanceLayout(init.instanceDir ?? DEFAULT_DIR, init.instanceId ?? DEFAULT_INSTANCE_ID);
    this.ready = this.prepare();
    // A failed preparation surfaces through `ready` and every call; never as an unhandled rejection.
    this.ready.catch(() => {});
  }

  /** Constructs a logger and waits until it is prepared. */
  static async open(init: LoggerInit = {}): Promise<Logger> {
    const logger = new Logger(init);
    await logger.ready;
    return logger;
  }

  get options(): LoggerOptions {
    if (!this.opts) throw new Error('the logger is not ready yet: await logger.ready');
    return this.opts;
  }

  /** How rows are validated under these options (the server's decode workers validate the same way). */
  get validation(): ValidationSettings {
    const o = this.options;
    return validationSettings(o.producer_config, o.aggregator_config.strict_df);
  }

  private async prepare(): Promise<void> {
    const opts = await resolveOptions(this.layout.optionsFile, this.init.options);
    await saveOptions(this.layout.optionsFile, opts);
    this.opts = opts;
    await mkdir(this.layout.daysDir, { recursive: true });
    const settings = this.validation;
    this.normalizers = Object.fromEntries(
      TABLE_NAMES.map((t) => [t, new RowNormalizer(SCHEMAS[t], settings, this.clock)]),
    ) as Record<TableName, RowNormalizer>;
    const p = opts.producer_config;
    this.producer = new Producer(p.max_queue_size, p.drop_policy, p.block_timeout_s * 1000, this.clock);
    for (const line of await readDayPhases(this.layout.daysIndex)) this.openedDays.add(line.day);
    const today = this.producer.today();
    await Promise.all(TABLE_NAMES.map((t) => this.table(t, today)));
    this.aggregator = new Aggregator(
      this.producer,
      opts.aggregator_config,
      (t, d) => this.writer(t, d),
      this.clock,
    );
    this.installHooks();
    if (opts.auto_start) await this.start();
  }

  /** The Delta table of one day, created on first use (and the day recorded as open). */
  private table(table: TableName, day: string): Promise<DeltaTable> {
    const key = `${table}/${day}`;
    let t = this.tables.get(key);
    if (!t) {
      t = (async () => {
        await this.recordOpenDay(day);
        return DeltaTable.createOrOpen(
          this.layout.tableDir(day, table),
          SCHEMAS[table],
          deltaOptions(this.options.storage_config),
        );
      })();
      t.catch(() => this.tables.delete(key));
      this.tables.set(key, t);
    }
    return t;
  }

  /** The aggregator's handle on a day's table; closing it (past days) forgets the table. */
  private async writer(table: TableName, day: string): Promise<TableWriter> {
    const dt = await this.table(table, day);
    return {
      append: (batch, opts) => dt.append(batch, opts),
      close: async () => {
        this.tables.delete(`${table}/${day}`);
        await dt.close();
      },
    };
  }

  private async recordOpenDay(day: string): Promise<void> {
    if (this.openedDays.has(day)) return;
    this.openedDays.add(day);
    await appendDayPhase(this.layout.daysIndex, { day, phase: 'open' });
  }

  /**
   * Starts accepting rows once the instance is prepared, so that `new Logger(...)`, `await
   * start()`, ingest works as specified. Idempotent: a started logger resolves at once. With
   * `auto_start` false, ingest is refused until then.
   */
  async start(): Promise<void> {
    if (!this.aggregator) await this.ready;
    if (this.state === 'running') return;
    if (this.state !== 'created') throw new Error(`cannot start a logger that is ${this.state}`);
    this.aggregator!.start();
    this.state = 'running';
  }

  /** Validates one log row and queues it: `[true, null]` or `[false, reason]`. */
  async ingestLog(row: Row): Promise<IngestTuple> {
    if (!this.aggregator) await this.ready;
    if (this.state !== 'running') return [false, this.state === 'created' ? 'not_started' : 'stopped'];
    const r = this.normalizers!.logs.normalize(row);
    if (typeof r === 'string') {
      this.producer!.countRejected(r);
      return [false, r];
    }
    const outcome = await this.producer!.enqueue('logs', [r]);
    return outcome === 'enqueued' ? OK : [false, outcome];
  }

  /**
   * Validates rows of one table and queues the valid ones together (all or none, see
   * Producer.enqueue). `waitMs` bounds the wait for room with drop_policy `block`.
   */
  async ingestRows(
    table: TableName,
    rows: readonly Row[],
    opts: { waitMs?: number } = {},
  ): Promise<IngestResult> {
    if (!this.aggregator) await this.ready;
    const result = emptyResult();
    if (this.refusedWhenNotRunning(result, rows.length)) return result;
    const normalizer = this.normalizers![table];
    if (!normalizer) throw new TypeError(`unknown table ${JSON.stringify(table)}`);
    const valid: RowValues[] = [];
    for (const row of rows) {
      const r = normalizer.normalize(row);
      if (typeof r !== 'string') valid.push(r);
      else this.countRejected(result, r, 1);
    }
    return settled(result, await this.producer!.enqueue(table, valid, opts.waitMs), valid.length);
  }

  /** Counts `n` rows rejected for `reason` in the result and in `stats()`. */
  private countRejected(result: IngestResult, reason: string, n: number): void {
    result.rejected += n;
    result.reasons[reason] = (result.reasons[reason] ?? 0) + n;
    result.firstError ??= reason;
    this.producer!.countRejected(reason, n);
  }

  /** With the logger not running, counts all `n` rows as dropped and returns true. */
  private refusedWhenNotRunning(result: IngestResult, n: number): boolean {
    if (this.state === 'running') return false;
    result.dropped = n;
    result.queueFull = true;
    result.firstError = this.state === 'created' ? 'not_started' : 'stopped';
    return true;
  }

  /**
   * Queues rows already validated and normalized into a column batch (the server's decode
   * workers build them with the logger's validation settings), all together or not at all.
   * `rejected` lists the reasons of rows the caller refused, by count: they appear in `stats()`.
   */
  async ingestBatch(
    table: TableName,
    batch: BatchPart,
    opts: { waitMs?: number; rejected?: Record<string, number> } = {},
  ): Promise<IngestResult> {
    if (!this.aggregator) await this.ready;
    if (!SCHEMAS[table]) throw new TypeError(`unknown table ${JSON.stringify(table)}`);
    const result = emptyResult();
    for (const [reason, n] of Object.entries(opts.rejected ?? {})) this.countRejected(result, reason, n);
    if (this.refusedWhenNotRunning(result, batch.numRows)) return result;
    return settled(result, await this.producer!.enqueueBatch(table, batch, opts.waitMs), batch.numRows);
  }

  /**
   * Stops the logger. `auto` writes everything accepted (queue included) within a bounded time;
   * `none` drops the queued rows and only finishes the writes already handed to the tables.
   */
  stop(opts: { flush?: FlushMode } = {}): Promise<void> {
    const flush = opts.flush ?? 'auto';
    if (flush !== 'auto' && flush !== 'none')
      throw new TypeError(`flush must be 'auto' or 'none', got ${String(flush)}`);
    this.stopping ??= this.shutdown(flush);
    return this.stopping;
  }

  private async shutdown(flush: FlushMode): Promise<void> {
    await this.ready.catch(() => {});
    this.state = 'stopping';
    this.removeHooks?.();
    const producer = this.producer;
    const aggregator = this.aggregator;
    if (producer && aggregator) {
      producer.close();
      if (flush === 'auto') {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, STOP_FLUSH_TIMEOUT_MS);
        });
        await Promise.race([aggregator.flushAll(), timeout]);
        clearTimeout(timer);
      } else {
        producer.discard();
      }
      await aggregator.close();
    }
    const open = [...this.tables.values()];
    this.tables.clear();
    await Promise.all(open.map((t) => t.then((dt) => dt.close()).catch(() => {})));
    this.state = 'stopped';
  }

  /** Signal handlers and the exit hook, as the options ask. */
  private installHooks(): void {
    const o = this.options;
    const removers: (() => void)[] = [];
    if (o.install_signal_handlers && this.init.handleSignals !== false) {
      for (const sig of ['SIGTERM', 'SIGINT'] as const) {
        const onSignal = () => {
          void this.stop({ flush: 'auto' }).finally(() => {
            // Re-raise when nobody else handles the signal, so the process ends as it would have.
            if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
          });
        };
        process.once(sig, onSignal);
        removers.push(() => process.removeListener(sig, onSignal));
      }
    }
    if (o.atexit_hook) {
      // The loop is about to empty with rows still pending: write them first.
      const onBeforeExit = () => {
        if (this.state === 'running' && this.hasPending()) void this.stop({ flush: 'auto' });
      };
      process.on('beforeExit', onBeforeExit);
      removers.push(() => process.removeListener('beforeExit', onBeforeExit));
    }
    this.removeHooks = () => {
      for (const r of removers) r();
    };
  }

  private hasPending(): boolean {
    const pending = this.aggregator!.pendingRows();
    return this.producer!.depth > 0 || Object.values(pending).some((n) => n > 0);
  }

  stats(): LoggerStats {
    if (!this.producer || !this.aggregator)
      throw new Error('the logger is not ready yet: await logger.ready');
    return {
      producer: this.producer.stats(),
      aggregator: this.aggregator.stats(),
      shipper: {
        enabled: this.options.shipper_enabled,
        configured: this.init.s3 !== undefined,
        state: 'not_available',
      },
    };
  }

  // ---- reads -------------------------------------------------------------------------------

  /** Rows of one table, newest first (see ReadQuery); `returnAs: 'lazy'` gives a LazyDataFrame. */
  read(table: TableName, query?: ReadQuery, opts?: { returnAs?: 'objects' }): Promise<Row[]>;
  read(table: TableName, query: ReadQuery | undefined, opts: { returnAs: 'lazy' }): Promise<LazyDataFrame>;
  read(
    table: TableName,
    query: ReadQuery = {},
    opts: { returnAs?: 'objects' | 'lazy' } = {},
  ): Promise<Row[] | LazyDataFrame> {
    return readTable(this.layout, table, query, opts);
  }

  readLogs<A extends ReadArgs>(q?: A): Promise<ReadOutput<A>> {
    return this.readWith('logs', q);
  }
  readSpans<A extends ReadArgs>(q?: A): Promise<ReadOutput<A>> {
    return this.readWith('spans', q);
  }
  readSpanEvents<A extends ReadArgs>(q?: A): Promise<ReadOutput<A>> {
    return this.readWith('span_events', q);
  }
  readSpanLinks<A extends ReadArgs>(q?: A): Promise<ReadOutput<A>> {
    return this.readWith('span_links', q);
  }
  readMetricPoints<A extends ReadArgs>(q?: A): Promise<ReadOutput<A>> {
    return this.readWith('metrics_points', q);
  }
  readMetricHist<A extends ReadArgs>(q?: A): Promise<ReadOutput<A>> {
    return this.readWith('metrics_hist', q);
  }

  private readWith<A extends ReadArgs>(table: TableName, q: A | undefined): Promise<ReadOutput<A>> {
    const { returnAs, ...query } = q ?? {};
    // readTable checks returnAs (and rejects an invalid one).
    const out = readTable(this.layout, table, query, { returnAs: returnAs ?? 'objects' });
    return out as Promise<ReadOutput<A>>; // returnAs decides which of the two it is
  }
}

export type ReadArgs = ReadQuery & { returnAs?: 'objects' | 'lazy' };

/** What a read helper resolves to: plain rows, or a LazyDataFrame with `returnAs: 'lazy'`. */
export type ReadOutput<A extends ReadArgs> = A extends { returnAs: 'lazy' } ? LazyDataFrame : Row[];
