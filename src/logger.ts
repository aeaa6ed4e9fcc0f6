// The in-process library: one Logger per instance. It prepares the instance (options, index,
// today's six tables), validates rows, queues them, and runs the aggregator that writes Delta
// tables. The HTTP server is a second front door onto the same Logger.

import { access, mkdir } from 'node:fs/promises';
import type { LazyDataFrame } from 'nodejs-polars';
import { type DamagedTable, DamagedTables, damageOf } from './damaged-tables.ts';
import { BatchBuilder, type BatchPart, type PackedBatch, sliceBatch } from './delta/batch.ts';
import { dataFileProblem, dataFileProblems } from './delta/check.ts';
import { DeltaTable, decodeCheckpointsOffThread, warmDeltaWorkers } from './delta/table.ts';
import {
  Aggregator,
  type AggregatorEvent,
  type AggregatorStats,
  type LogHooks,
  type TableWriter,
} from './pipeline/aggregator.ts';
import { Producer, type ProducerStats, type Queued, type Reservation } from './pipeline/producer.ts';
import { camelCaseArgs } from './read/filters.ts';
import {
  DamagedTableError,
  type JsonChunk,
  type ReadChunk,
  type ReadQuery,
  readTable,
  type StreamOptions,
  streamJson,
  streamRows,
} from './read/query.ts';
import { type Row, SCHEMAS, TABLE_NAMES, type TableName } from './schema/tables.ts';
import {
  RowNormalizer,
  type RowValues,
  type ValidationSettings,
  validationSettings,
} from './schema/validate.ts';
import {
  type ShipProgress,
  Shipper,
  type ShipperStats,
  type ShipperTiming,
  type ShipSummary,
} from './shipping/shipper.ts';
import { appendDayPhase, type DayPhaseLine, finishedDays, readDayPhases } from './storage/days-index.ts';
import { DEFAULT_DIR, DEFAULT_INSTANCE_ID, InstanceLayout } from './storage/layout.ts';
import {
  deltaOptions,
  type LoggerOptions,
  memoryLimit,
  type PartialOptions,
  resolveOptions,
  saveOptions,
} from './storage/options.ts';
import { lockInstance } from './storage/process-lock.ts';
import { type ResolvedS3, resolveS3, S3_CONFIG_KEYS, type S3Config } from './storage/s3-config.ts';
import { type WalEntry, type WalOptions, type WalStats, WriteAheadLog } from './wal/wal.ts';

export type { S3Config } from './storage/s3-config.ts';

export interface LoggerInit {
  instanceId?: string;
  instanceDir?: string;
  /** The specification's spelling of `instanceId` (either may be given, not both differing). */
  instance_id?: string;
  /** The specification's spelling of `instanceDir`. */
  instance_dir?: string;
  options?: PartialOptions;
  /** Object-storage settings; each field given overrides its environment variables (never persisted). */
  s3?: S3Config;
  /** Milliseconds since the epoch; injectable for tests (day boundaries, batch ages). */
  clock?: () => number;
  /**
   * Runtime override, not persisted: false leaves SIGTERM/SIGINT alone even when
   * `install_signal_handlers` is on (the server installs its own, which stop this logger).
   */
  handleSignals?: boolean;
  /**
   * Where the logger reports what an operator must see (writes failing and recovering, a damaged
   * write-ahead log segment). Default: one line on stderr.
   */
  log?: LogSink;
  /** Runtime override, not persisted: false ships only through shipNow (`otelake ship`). */
  autoShip?: boolean;
  /**
   * Shipping's timing: how often finished days are looked for (default 30 s) and the retry
   * delays of failed steps (default 5 s doubling up to 15 min, with jitter).
   */
  shipperTiming?: ShipperTiming;
  /** How often rows the replay had to leave in the write-ahead log are tried again (default 5 s). */
  heldRetryMs?: number;
  /** How long a stop with `flush: 'auto'` waits for the tables' writes (default 30 s). */
  stopFlushTimeoutMs?: number;
}

const INIT_KEYS: readonly (keyof LoggerInit)[] = [
  'instanceId',
  'instanceDir',
  'options',
  's3',
  'clock',
  'handleSignals',
  'log',
  'autoShip',
  'shipperTiming',
  'heldRetryMs',
  'stopFlushTimeoutMs',
];
const SPEC_SPELLINGS: Readonly<Record<string, 'instanceId' | 'instanceDir'>> = {
  instance_id: 'instanceId',
  instance_dir: 'instanceDir',
};

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * `init` checked: an object whose keys are settings (a mistyped one, or a path given instead of
 * the object, would otherwise put the data in ./svc_data unnoticed), the specification's
 * spellings taken as their camelCase settings, the instance's names strings, s3 an object of
 * S3Config fields.
 */
function checkedInit(init: unknown): LoggerInit {
  if (init === undefined) return {};
  const where = 'new Logger(init)';
  if (!isPlainObject(init)) {
    throw new TypeError(
      `${where}: init is an object such as { instanceDir: './svc_data', instanceId: 'default' }, got ${
        init === null ? 'null' : Array.isArray(init) ? 'an array' : typeof init
      }`,
    );
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(init)) {
    if (value === undefined) continue;
    const name = SPEC_SPELLINGS[key] ?? key;
    if (!(INIT_KEYS as readonly string[]).includes(name)) {
      throw new TypeError(
        `${where}: unknown setting ${JSON.stringify(key)}; the settings: ${INIT_KEYS.join(', ')}`,
      );
    }
    if (out[name] !== undefined && out[name] !== value) {
      const spec = Object.keys(SPEC_SPELLINGS).find((k) => SPEC_SPELLINGS[k] === name);
      throw new TypeError(`${where}: ${spec} and ${name} are the same setting, given two values`);
    }
    out[name] = value;
  }
  for (const name of ['instanceId', 'instanceDir'] as const) {
    if (out[name] !== undefined && typeof out[name] !== 'string') {
      throw new TypeError(`${where}: ${name} is a string, got ${typeof out[name]}`);
    }
  }
  const s3 = out['s3'];
  if (s3 !== undefined) {
    if (!isPlainObject(s3)) throw new TypeError(`${where}: s3 is an object of S3 settings`);
    for (const key of Object.keys(s3)) {
      if (!(S3_CONFIG_KEYS as readonly string[]).includes(key)) {
        throw new TypeError(
          `${where}: unknown s3 setting ${JSON.stringify(key)}; the settings: ${S3_CONFIG_KEYS.join(', ')}`,
        );
      }
    }
  }
  return out as LoggerInit;
}

export type LogSink = (level: 'error' | 'warn' | 'info', message: string) => void;

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

/** The rows of one request for each table it feeds, validated and normalized into columns. */
export type RequestTables = Partial<
  Record<
    TableName,
    { batch: PackedBatch /** Rows the caller refused, by reason. */; rejected?: Record<string, number> }
  >
>;

/**
 * What became of a request, admitted whole or not at all: `accepted` (queued, and with
 * durability "wal" durable), `dropped` (refused by drop_newest, or drop_oldest that could not make
 * room), `queue_full` (no room within the wait), `project_full` (a project of the request holds
 * its share of the queue, producer_config.project_queue_share), `unavailable` (writes or the
 * write-ahead log are failing: retry later), `stopped`, `not_started`.
 */
export type RequestOutcome =
  | 'accepted'
  | 'dropped'
  | 'queue_full'
  | 'project_full'
  | 'unavailable'
  | 'stopped'
  | 'not_started';

export interface RequestResult {
  outcome: RequestOutcome;
  /** Why, when the outcome is not `accepted`. */
  message: string | null;
  /** Per table: rows accepted, rejected by validation, dropped. */
  tables: Partial<Record<TableName, IngestResult>>;
}

export interface LoggerStats {
  durability: 'wal' | 'memory';
  producer: ProducerStats;
  aggregator: AggregatorStats;
  /** The write-ahead log (null with durability "memory"). */
  wal: WalStats | null;
  /** Day tables found damaged (see `otelake check`): ingest into today's answers 503, reads of them fail. */
  damaged_tables: DamagedTable[];
  shipper: ShipperStats;
}

export type FlushMode = 'auto' | 'none';

type State = 'created' | 'running' | 'stopping' | 'stopped';

const OK: IngestTuple = Object.freeze([true, null]) as unknown as IngestTuple;

/** How often rows the replay had to leave in the write-ahead log are tried again. */
const HELD_RETRY_MS = 5_000;

/** Rows of one table and day held in the write-ahead log since the replay (see Logger.replay). */
interface HeldRows {
  table: TableName;
  day: string;
  /** Sequence ranges, in log order. */
  ranges: { seq: number; rows: number }[];
  /** Why the table did not open, at the last try. */
  reason: string;
}

/**
 * How many of the `rows` logged from `seq` a table already has, by the log position its `txn`
 * records (`upTo`): they are released, the rest are queued.
 */
function committedRows(seq: number, rows: number, upTo: number): number {
  return Math.min(rows, Math.max(0, upTo - seq));
}

function holdRange(h: HeldRows, seq: number, rows: number): void {
  const last = h.ranges.at(-1);
  if (last && last.seq + last.rows === seq) last.rows += rows;
  else h.ranges.push({ seq, rows });
}

function heldProblem(h: HeldRows): string {
  const rows = h.ranges.reduce((n, r) => n + r.rows, 0);
  return (
    `${rows} rows of the ${h.table} table of ${h.day} from before the restart are held in the ` +
    `write-ahead log until the table opens (${h.reason}); ingest into it answers 503 meanwhile`
  );
}

/** How often whenDayLanded looks again at the queue and the batches. */
const LANDED_POLL_MS = 20;

/** How long `stop({ flush: 'auto' })` may take to write what is pending. */
const STOP_FLUSH_TIMEOUT_MS = 30_000;

/** An ingest result with nothing counted yet. */
function emptyResult(): IngestResult {
  return { accepted: 0, rejected: 0, dropped: 0, queueFull: false, firstError: null, reasons: {} };
}

/** Counts `n` rows as dropped for this outcome (or logger state) in the result. */
function refused(result: IngestResult, outcome: RequestOutcome | State, n: number): IngestResult {
  result.dropped = n;
  result.queueFull = true;
  const reason =
    outcome === 'created' ? 'not_started' : REASON[outcome as Exclude<RequestOutcome, 'accepted'>];
  result.firstError = reason ?? String(outcome);
  return result;
}

/** Library rows gathered for one write-ahead log record, with the room reserved for each call. */
interface Collected {
  table: TableName;
  day: string;
  builder: BatchBuilder;
  reservations: Reservation[];
  /** Resolves once the rows are queued (true) or could not be logged (false). */
  done: Promise<boolean>;
}

/** Why ingest is refused for a request outcome that is not `accepted`, as an ingestLog reason. */
const REASON: Record<Exclude<RequestOutcome, 'accepted'>, string> = {
  dropped: 'queue_full',
  queue_full: 'queue_full',
  project_full: 'project_queue_share',
  unavailable: 'storage_unavailable',
  stopped: 'stopped',
  not_started: 'not_started',
};

/** The default log sink: one line on stderr. */
const stderrSink: LogSink = (level, message) => console.error(`otelake ${level}: ${message}`);

/** OTELAKE_WAL_SEGMENT_BYTES: the log's segment size (default 64 MiB); each spare takes as much disk. */
function walOptionsFromEnv(warn: (message: string) => void): WalOptions {
  const value = process.env['OTELAKE_WAL_SEGMENT_BYTES'];
  if (value === undefined || value === '') return {};
  const bytes = Number(value);
  if (Number.isSafeInteger(bytes) && bytes >= 4096) return { segmentBytes: bytes };
  warn(`OTELAKE_WAL_SEGMENT_BYTES=${value} ignored: expected an integer of at least 4096 (bytes)`);
  return {};
}

/**
 * The stops a SIGTERM or SIGINT runs: one handler per signal for every Logger of the process that
 * installs them, so that the signal ends the process once all have flushed. Each Logger re-raising
 * it once its own stop ended killed the process under the others' flush.
 */
const stopsOnSignal = new Set<() => Promise<void>>();
const SIGNALS = ['SIGTERM', 'SIGINT'] as const;

function onStopSignal(sig: NodeJS.Signals): void {
  for (const s of SIGNALS) process.removeListener(s, onStopSignal); // a second signal ends it at once
  void Promise.allSettled([...stopsOnSignal].map((stop) => stop())).then(() => {
    // Re-raised when nobody else handles the signal, so the process ends as it would have.
    if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
  });
}

/** Adds a Logger's stop to what the signals run; returns its removal. */
function stopOnSignals(stop: () => Promise<void>): () => void {
  if (stopsOnSignal.size === 0) for (const s of SIGNALS) process.once(s, onStopSignal);
  stopsOnSignal.add(stop);
  return () => {
    stopsOnSignal.delete(stop);
    if (stopsOnSignal.size === 0) for (const s of SIGNALS) process.removeListener(s, onStopSignal);
  };
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
  private wal: WriteAheadLog | null = null;
  private readonly logSink: LogSink;
  /** Library rows waiting for the next write-ahead log write, per table and day (see collect). */
  private collecting = new Map<string, Collected>();
  /** Rows captured for a day and not queued yet (their write-ahead log write is under way), by day. */
  private readonly capturing = new Map<string, number>();
  /** Object-storage settings: the `s3` argument over the environment. */
  private readonly s3: ResolvedS3;
  private shipper: Shipper | null = null;
  private readonly damaged: DamagedTables;
  /**
   * Rows the replay at start left in the write-ahead log, their table not opening then: their
   * ranges by table and day (see replay). Ingest into that table and day is refused, and a seal
   * of the day fails, until a later try queues them.
   */
  private readonly held = new Map<string, HeldRows>();
  private heldTimer: NodeJS.Timeout | null = null;
  private requeueing: Promise<void> | null = null;

  constructor(given: LoggerInit = {}) {
    const init = checkedInit(given);
    this.init = init;
    this.clock = init.clock ?? Date.now;
    this.logSink = init.log ?? stderrSink;
    this.damaged = new DamagedTables(this.clock);
    this.layout = new InstanceLayout(init.instanceDir ?? DEFAULT_DIR, init.instanceId ?? DEFAULT_INSTANCE_ID);
    this.s3 = resolveS3(init.s3);
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

  /** Releases instance.lock, which the logger holds from its preparation to the end of its stop. */
  private unlock: (() => Promise<void>) | null = null;

  private async prepare(): Promise<void> {
    // The tables this process opens (today's, a day's seal) are read off its event loop.
    decodeCheckpointsOffThread(true);
    // One writer per instance: before anything is read or written (the log's replay above all).
    this.unlock = await lockInstance(this.layout);
    try {
      await this.prepareLocked();
    } catch (err) {
      await this.unlock();
      this.unlock = null;
      throw err;
    }
  }

  private async prepareLocked(): Promise<void> {
    const opts = await resolveOptions(this.layout.optionsFile, this.init.options);
    try {
      await saveOptions(this.layout.optionsFile, opts);
    } catch (err) {
      // A full or read-only disk: the server still starts (its log replays, reads work, ingest
      // answers 503 until writes succeed); the file keeps the options it had.
      this.logSink(
        'warn',
        `cannot save the options to ${this.layout.optionsFile} (${(err as Error).message}); ` +
          'running with them anyway',
      );
    }
    this.opts = opts;
    await mkdir(this.layout.daysDir, { recursive: true });
    const settings = this.validation;
    this.normalizers = Object.fromEntries(
      TABLE_NAMES.map((t) => [t, new RowNormalizer(SCHEMAS[t], settings, this.clock)]),
    ) as Record<TableName, RowNormalizer>;
    const p = opts.producer_config;
    this.producer = new Producer(
      p.max_queue_size,
      p.drop_policy,
      p.block_timeout_s * 1000,
      this.clock,
      p.project_queue_share,
    );
    const phases = await readDayPhases(this.layout.daysIndex);
    for (const line of phases) this.openedDays.add(line.day);
    this.producer.onClockBack = (clockDay, day) =>
      this.logSink(
        'warn',
        `the clock went back to ${clockDay}: rows keep going to the tables of ${day} until it ` +
          'passes the end of that day, since the day before may be sealed already',
      );
    // After a restart too, no rows into a day already sealed while the clock stands in it.
    const lastFinished = [...finishedDays(phases)].sort().at(-1);
    if (lastFinished !== undefined) this.producer.sealedThrough(lastFinished);
    const today = this.producer.today();
    // A table that cannot be opened is reported and refused alone: the others serve.
    await Promise.all(
      TABLE_NAMES.map((t) =>
        this.table(t, today).catch((err: unknown) => {
          if (damageOf(err) === null)
            this.logSink('error', `cannot open the ${t} table of ${today}: ${(err as Error).message}`);
        }),
      ),
    );
    // Segments left by a run with "wal" (a crash, or a stop that gave up) hold acknowledged rows:
    // with "memory" this run keeps the log as "wal" would, so that they are written; the next
    // start, the log emptied, runs as asked.
    const leftInLog = opts.durability === 'memory' && (await WriteAheadLog.holdsSegments(this.layout.walDir));
    if (leftInLog) {
      this.logSink(
        'warn',
        `the write-ahead log holds rows of a run with durability "wal": they are written first, and this run logs ` +
          'its rows too (as with "wal"); the next start runs with "memory"',
      );
    }
    if (opts.durability === 'wal' || leftInLog) {
      const { wal, damaged } = await WriteAheadLog.open(
        this.layout.walDir,
        walOptionsFromEnv((message) => this.logSink('warn', message)),
      );
      for (const path of damaged) {
        this.logSink(
          'error',
          `write-ahead log segment with an unreadable header moved aside, not replayed: ${path}`,
        );
      }
      this.wal = wal;
      wal.onProblem = (err) =>
        err === null
          ? this.logSink('info', 'writes to the write-ahead log work again')
          : this.logSink(
              'error',
              `writes to the write-ahead log are failing (${err.message}); ingest answers 503 until they work again`,
            );
      // Rows evicted by drop_oldest are given up: the log lets them go.
      this.producer.onEvict = (q, rows) => {
        if (q.seq !== undefined) wal.release(q.seq + (q.batch ? q.from : 0), rows);
      };
    }
    this.aggregator = new Aggregator({
      producer: this.producer,
      cfg: opts.aggregator_config,
      openTable: (t, d) => this.writer(t, d),
      clock: this.clock,
      log: this.wal ? this.logHooks(this.wal) : null,
      onEvent: (e) => this.report(e),
    });
    // Running before replay: replayed rows drain into the tables while the log is read.
    this.aggregator.start();
    if (this.wal) await this.replay(this.wal, phases);
    this.shipper = this.createShipper(opts);
    await this.shipper.pendingDays();
    this.installHooks();
    if (opts.auto_start) await this.start();
  }

  /** What the aggregator needs of the write-ahead log. */
  private logHooks(wal: WriteAheadLog): LogHooks {
    return {
      appId: wal.appId,
      release: (seq, rows) => wal.release(seq, rows),
      read: async (table, day, ranges) =>
        (await wal.read(table, day, ranges)).map((r) => sliceBatch(SCHEMAS[table], r.batch, r.from, r.to)),
    };
  }

  /**
   * Queues the rows an earlier process logged but did not commit: each table's `txn` for this
   * log says up to which row it has them, so every row is written exactly once. Days already
   * sealed had every row before they were sealed.
   */
  private async replay(wal: WriteAheadLog, phases: readonly DayPhaseLine[]): Promise<void> {
    const finished = finishedDays(phases);
    const committed = new Map<string, number | null>();
    let replayed = 0;
    for await (const e of wal.replay()) {
      const rows = e.batch.numRows;
      if (finished.has(e.day)) {
        wal.release(e.seq, rows);
        continue;
      }
      const key = `${e.table}/${e.day}`;
      if (!committed.has(key)) {
        try {
          committed.set(key, (await this.table(e.table, e.day)).txnVersion(wal.appId) ?? 0);
        } catch (err) {
          // The table cannot be opened: its rows stay in the log, held until a later try queues
          // them (requeueHeld). Meanwhile no newer row of it may be committed: its `txn` would
          // then count the held rows as written, and the next start would skip them.
          const reason = (err as Error).message;
          this.logSink(
            'error',
            `cannot replay rows of ${key} from the write-ahead log: ${reason}; they stay in it and are ` +
              'tried again every few seconds; until then ingest into that table and day answers 503 ' +
              'and a seal of the day fails',
          );
          this.held.set(key, { table: e.table, day: e.day, ranges: [], reason });
          committed.set(key, null);
        }
      }
      const upTo = committed.get(key);
      if (upTo === null || upTo === undefined) {
        holdRange(this.held.get(key)!, e.seq, rows);
        continue;
      }
      const from = committedRows(e.seq, rows, upTo);
      if (from > 0) wal.release(e.seq, from);
      if (from === rows) continue;
      const res = await this.producer!.reserve(rows - from, Number.POSITIVE_INFINITY, true);
      if (typeof res === 'string') throw new Error(`replay of the write-ahead log interrupted (${res})`);
      this.producer!.fill(res, [{ table: e.table, day: e.day, batch: e.batch, from, to: rows, seq: e.seq }]);
      replayed += rows - from;
    }
    if (replayed > 0) this.logSink('info', `replayed ${replayed} rows from the write-ahead log`);
    if (this.held.size > 0) {
      this.heldTimer = setInterval(() => void this.requeueHeld(), this.init.heldRetryMs ?? HELD_RETRY_MS);
      this.heldTimer.unref();
    }
  }

  /** Queues the held rows of each table that opens now (see replay); the others wait for the next try. */
  private requeueHeld(): Promise<void> {
    this.requeueing ??= (async () => {
      const wal = this.wal!;
      for (const [key, h] of this.held) {
        if (this.state === 'stopping' || this.state === 'stopped') return;
        let upTo: number;
        try {
          upTo = (await this.table(h.table, h.day)).txnVersion(wal.appId) ?? 0;
        } catch (err) {
          h.reason = (err as Error).message;
          continue;
        }
        // As at the replay: the rows the table has are released, the others queued in log order.
        const left: { seq: number; rows: number }[] = [];
        for (const r of h.ranges) {
          const done = committedRows(r.seq, r.rows, upTo);
          if (done > 0) wal.release(r.seq, done);
          if (done < r.rows) left.push({ seq: r.seq + done, rows: r.rows - done });
        }
        h.ranges = left;
        try {
          const parts = left.length === 0 ? [] : await wal.read(h.table, h.day, left);
          const rows = parts.reduce((n, p) => n + p.to - p.from, 0);
          const res = rows === 0 ? null : await this.producer!.reserve(rows, Number.POSITIVE_INFINITY, true);
          if (typeof res === 'string') return; // stopping: the rows stay in the log
          if (res !== null)
            this.producer!.fill(
              res,
              parts.map((p) => ({
                table: h.table,
                day: h.day,
                batch: p.batch,
                from: p.from,
                to: p.to,
                seq: p.seq,
              })),
            );
          this.logSink('info', `queued ${rows} rows of ${key} that the write-ahead log held since the start`);
        } catch (err) {
          h.reason = `cannot read them back from the write-ahead log: ${(err as Error).message}`;
          continue;
        }
        this.held.delete(key);
      }
      if (this.held.size === 0 && this.heldTimer) {
        clearInterval(this.heldTimer);
        this.heldTimer = null;
      }
    })().finally(() => {
      this.requeueing = null;
    });
    return this.requeueing;
  }

  /** A line for the operator when a table's writes fail or recover. */
  private report(e: AggregatorEvent): void {
    if (e.kind === 'write_failed') {
      const f = e.failure;
      this.logSink(
        'error',
        `writes to ${f.table} ${f.day} are failing (${f.message}); its rows are kept and retried, ` +
          'ingest into it answers 503 until they land',
      );
    } else {
      this.logSink('info', `writes to ${e.table} ${e.day} recovered after ${e.attempts} attempts`);
    }
  }

  /** The Delta table of one day, created on first use (and the day recorded as open). */
  private table(table: TableName, day: string): Promise<DeltaTable> {
    const key = `${table}/${day}`;
    let t = this.tables.get(key);
    if (!t) {
      t = (async () => {
        await this.recordOpenDay(day);
        const dt = await DeltaTable.createOrOpen(this.layout.tableDir(day, table), SCHEMAS[table], {
          ...deltaOptions(this.options.storage_config),
          // In the operator's log, not a bare process warning; nothing is lost, it runs again later.
          onBackgroundError: (task, err) => {
            const next =
              task === 'deleting replaced files'
                ? 'they stay on disk until a seal vacuums the day'
                : 'it runs again later';
            this.logSink('warn', `the ${table} table of ${day}: ${task} failed (${err.message}); ${next}`);
          },
        });
        await this.checkOpened(dt, table, day);
        return dt;
      })();
      t.catch((err: unknown) => {
        this.tables.delete(key);
        const reason = damageOf(err);
        if (reason !== null && this.damaged.note(table, day, reason, 'open')) {
          this.logSink(
            'error',
            `the ${table} table of ${day} is damaged: ${reason}; ingest into it is refused, other tables ` +
              'work on; `otelake check` says how to repair it',
          );
        }
      });
      this.tables.set(key, t);
    }
    return t;
  }

  /**
   * A table just opened: its live data files must be there and readable (else it is damaged, and
   * closed again); a newest checkpoint that cannot be read is replaced by a new one, so that other
   * readers, which start from it, can read the table again (ingest goes on meanwhile).
   */
  private async checkOpened(dt: DeltaTable, table: TableName, day: string): Promise<void> {
    const problems = await dataFileProblems(dt);
    if (problems.size > 0) {
      await dt.close();
      throw new DamagedTableError(table, day, [...problems.values()].join('; '));
    }
    if (dt.unreadableCheckpoints.length > 0) {
      const what = dt.unreadableCheckpoints.map((c) => `checkpoint ${c.version} (${c.message})`).join(', ');
      try {
        await dt.mendCheckpoints();
        this.logSink(
          'warn',
          `the ${table} table of ${day} had an unreadable ${what}: a new checkpoint mends it`,
        );
      } catch (err) {
        this.logSink(
          'error',
          `the ${table} table of ${day} has an unreadable ${what}: ${(err as Error).message}`,
        );
      }
    }
    if (this.damaged.clear(table, day))
      this.logSink('info', `the ${table} table of ${day} opens cleanly again`);
  }

  /** The aggregator's handle on a day's table; closing it (past days) forgets the table. */
  private async writer(table: TableName, day: string): Promise<TableWriter> {
    const dt = await this.table(table, day);
    return {
      write: (batch) => dt.writeFile(batch, { transfer: true }),
      commit: (files, txn) => dt.commitFiles(files, txn ? { txn } : {}),
      discard: (file) => dt.discardFile(file),
      close: async () => {
        this.tables.delete(`${table}/${day}`);
        await dt.close();
        // A finished day's files replaced by in-day compaction go now, not at a seal that an
        // instance without shipping never runs (today's go as their removals expire).
        if (day < this.producer!.today()) {
          await dt
            .deleteRemovedFiles()
            .catch((err: Error) => this.logSink('warn', `the ${table} table of ${day}: ${err.message}`));
        }
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
    this.shipper!.start(); // resumes unfinished past days (shipper_enabled and S3 configured)
  }

  /**
   * Validates one log row and queues it: `[true, null]` or `[false, reason]`. With durability
   * "wal" it resolves once the row is in the write-ahead log.
   */
  async ingestLog(row: Row): Promise<IngestTuple> {
    if (!this.aggregator) await this.ready;
    if (this.state !== 'running') return [false, this.state === 'created' ? 'not_started' : 'stopped'];
    const r = this.normalizers!.logs.normalize(row);
    if (typeof r === 'string') {
      this.producer!.countRejected(r);
      return [false, r];
    }
    const outcome = await this.queueRows('logs', [r]);
    return outcome === 'accepted' ? OK : [false, REASON[outcome]];
  }

  /**
   * Validates rows of one table and queues the valid ones together (all or none, see
   * Producer.reserve). `waitMs` bounds the wait for room with drop_policy `block`.
   */
  async ingestRows(
    table: TableName,
    rows: readonly Row[],
    opts: { waitMs?: number } = {},
  ): Promise<IngestResult> {
    if (!this.aggregator) await this.ready;
    const result = emptyResult();
    if (this.state !== 'running') return refused(result, this.state, rows.length);
    const normalizer = this.normalizers![table];
    if (!normalizer) throw new TypeError(`unknown table ${JSON.stringify(table)}`);
    const valid: RowValues[] = [];
    for (const row of rows) {
      const r = normalizer.normalize(row);
      if (typeof r !== 'string') valid.push(r);
      else this.countRejected(result, r, 1);
    }
    const outcome = await this.queueRows(table, valid, opts.waitMs);
    if (outcome === 'accepted') result.accepted = valid.length;
    else refused(result, outcome, valid.length);
    return result;
  }

  /**
   * Queues rows of the library, all or none. With durability "wal" they are first gathered with
   * the other rows given in the same event-loop turn into one write-ahead log record per table
   * and day (so that concurrent `ingestLog` calls share a write and a sync), and queued once it is
   * durable.
   */
  private async queueRows(table: TableName, rows: RowValues[], waitMs?: number): Promise<RequestOutcome> {
    if (rows.length === 0) return 'accepted';
    const down = this.unavailable([table]);
    if (down) return 'unavailable';
    const res = await this.producer!.reserve(rows.length, waitMs);
    if (typeof res === 'string') return this.refusal(res);
    const day = this.producer!.today();
    if (!this.wal) {
      this.producer!.fill(
        res,
        rows.map((values) => ({ table, day, values })),
      );
      return 'accepted';
    }
    const key = `${table}/${day}`;
    let c = this.collecting.get(key);
    if (!c) {
      c = { table, day, builder: new BatchBuilder(SCHEMAS[table], 256), reservations: [], done: null! };
      c.done = new Promise<boolean>((resolve) => {
        setImmediate(() => resolve(this.logCollected(key)));
      });
      this.collecting.set(key, c);
      this.capture(day, 1);
    }
    for (const values of rows) c.builder.pushValues(values);
    c.reservations.push(res);
    return (await c.done) ? 'accepted' : 'unavailable';
  }

  /** Writes a gathering of library rows to the write-ahead log and queues it; false if that failed. */
  private async logCollected(key: string): Promise<boolean> {
    const c = this.collecting.get(key)!;
    this.collecting.delete(key);
    const batch = c.builder.pack(); // the builder is dropped: finish() would only allocate its next batch
    try {
      await this.wal!.append([{ table: c.table, day: c.day, batch }], ([e]) => {
        this.producer!.fill(c.reservations, [
          { table: c.table, day: c.day, batch, from: 0, to: batch.numRows, seq: e!.seq },
        ]);
      });
      return true;
    } catch {
      for (const r of c.reservations) this.producer!.cancel(r);
      return false;
    } finally {
      this.capture(c.day, -1);
    }
  }

  /**
   * Queues the rows of one request, validated and normalized into columns by the caller (the
   * server's decode workers, with the logger's validation settings), for every table it feeds:
   * all of them or none, so that a request refused and retried is never half stored twice. With
   * durability "wal" the rows are durable in the write-ahead log when this resolves `accepted`.
   * The rows the caller refused are counted in `stats()` whatever the outcome. `projects` (the
   * rows by project) holds them against producer_config.project_queue_share.
   */
  async ingestRequest(
    tables: RequestTables,
    opts: { waitMs?: number; projects?: Readonly<Record<string, number>> } = {},
  ): Promise<RequestResult> {
    if (!this.aggregator) await this.ready;
    const results: Partial<Record<TableName, IngestResult>> = {};
    const entries: WalEntry[] = [];
    let rows = 0;
    for (const [table, t] of Object.entries(tables) as [TableName, NonNullable<RequestTables[TableName]>][]) {
      if (!SCHEMAS[table]) throw new TypeError(`unknown table ${JSON.stringify(table)}`);
      const r = emptyResult();
      for (const [reason, n] of Object.entries(t.rejected ?? {})) this.countRejected(r, reason, n);
      results[table] = r;
      if (t.batch.numRows > 0) entries.push({ table, day: '', batch: t.batch });
      rows += t.batch.numRows;
    }
    const settle = (outcome: RequestOutcome, message: string | null = null): RequestResult => {
      for (const e of entries) {
        const r = results[e.table]!;
        if (outcome === 'accepted') r.accepted = e.batch.numRows;
        else refused(r, outcome, e.batch.numRows);
      }
      return { outcome, message, tables: results };
    };
    if (this.state !== 'running') return settle(this.state === 'created' ? 'not_started' : 'stopped');
    if (rows === 0) return settle('accepted');
    warmDeltaWorkers(); // loading while the rows wait in the queue, not once a file is due
    const down = this.unavailable(entries.map((e) => e.table));
    if (down) return settle('unavailable', down);
    const res = await this.producer!.reserve(rows, opts.waitMs, false, opts.projects);
    if (typeof res === 'string') return settle(this.refusal(res));
    const day = this.producer!.today();
    for (const e of entries) e.day = day;
    const queued = (logged: readonly { batch: BatchPart; seq?: number }[]): Queued[] =>
      entries.map((e, i) => ({
        table: e.table,
        day,
        batch: e.batch,
        from: 0,
        to: e.batch.numRows,
        seq: logged[i]?.seq,
      }));
    if (!this.wal) {
      this.producer!.fill(res, queued([]));
      return settle('accepted');
    }
    this.capture(day, 1);
    try {
      await this.wal.append(entries, (logged) => this.producer!.fill(res, queued(logged)));
    } catch (err) {
      this.producer!.cancel(res);
      return settle('unavailable', `cannot write to the write-ahead log: ${(err as Error).message}`);
    } finally {
      this.capture(day, -1);
    }
    return settle('accepted');
  }

  /** Why rows of these tables cannot be taken now (damaged, or their writes are failing), or null. */
  private unavailable(tables: readonly TableName[]): string | null {
    const damage = this.damagedToday(tables);
    if (damage) return damage;
    if (this.held.size > 0) {
      const today = this.producer!.today();
      for (const t of tables) {
        const h = this.held.get(`${t}/${today}`);
        if (h) return heldProblem(h);
      }
    }
    for (const t of tables) {
      const f = this.aggregator!.failure(t);
      if (f) return `writes to ${f.table} are failing: ${f.message}`;
    }
    return null;
  }

  /** Why one of these tables of today is damaged, or null; now and then it is tried again. */
  private damagedToday(tables: readonly TableName[]): string | null {
    const today = this.producer!.today();
    for (const t of tables) {
      const d = this.damaged.get(t, today);
      if (!d) continue;
      // Repaired meanwhile? Opening it again (or, for damage a read found in an open table,
      // checking it again) clears the entry; the refusal stands until then.
      if (this.damaged.dueForRetry(t, today)) {
        if (d.found_by === 'read') void this.recheckDamage(t, today, d.file).catch(() => {});
        else void this.table(t, today).catch(() => {});
      }
      return `the ${t} table of ${today} is damaged (${d.reason}); \`otelake check\` says how to repair it`;
    }
    return null;
  }

  /** The outcome of a refused reservation. */
  private refusal(res: 'queue_full' | 'stopped' | 'project_full'): RequestOutcome {
    if (res === 'stopped' || res === 'project_full') return res;
    return this.options.producer_config.drop_policy === 'block' ? 'queue_full' : 'dropped';
  }

  /** Counts `n` rows rejected for `reason` in the result and in `stats()`. */
  private countRejected(result: IngestResult, reason: string, n: number): void {
    result.rejected += n;
    result.reasons[reason] = (result.reasons[reason] ?? 0) + n;
    result.firstError ??= reason;
    this.producer!.countRejected(reason, n);
  }

  /**
   * Rows accepted but not written to their tables when the logger stopped: with `auto`, those the
   * flush could not write within its time (writes failing); 0 while running. With the
   * write-ahead log they are in it, for the next start; with `durability: memory` they are lost.
   */
  unwrittenAtStop = 0;

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
    if (this.heldTimer) clearInterval(this.heldTimer);
    await this.requeueing; // held rows it has not queued stay in the log for the next start
    this.removeHooks?.();
    await this.shipper?.stop();
    const producer = this.producer;
    const aggregator = this.aggregator;
    if (producer && aggregator) {
      producer.close();
      // Requests whose rows are being logged are acknowledged once they are: queue them first.
      await Promise.all([...this.collecting.values()].map((c) => c.done));
      await this.wal?.settled();
      // With a write-ahead log the queued rows stay in it for the next start.
      if (flush === 'none' && !this.wal) producer.discard();
      // `auto` writes everything accepted; `none` the batches already handed to the tables (and
      // commits them: close() gives up what is left, which would drop a file written, not committed).
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), this.init.stopFlushTimeoutMs ?? STOP_FLUSH_TIMEOUT_MS);
      });
      const writing = flush === 'auto' ? aggregator.flushAll() : aggregator.waitForWrites();
      const written = await Promise.race([writing.then(() => true), timeout]);
      clearTimeout(timer);
      if (!written) {
        const pending = Object.values(aggregator.pendingRows()).reduce((a, b) => a + b, 0);
        this.noteUnwritten((flush === 'auto' ? producer.depth : 0) + pending);
      }
      await aggregator.close();
      await this.wal?.close();
    }
    const open = [...this.tables.values()];
    this.tables.clear();
    await Promise.all(open.map((t) => t.then((dt) => dt.close()).catch(() => {})));
    await this.unlock?.();
    this.unlock = null;
    this.state = 'stopped';
  }

  /** The stop's flush gave up on `rows` rows (their writes kept failing): said loudly, and kept for the caller. */
  private noteUnwritten(rows: number): void {
    this.unwrittenAtStop = rows;
    const failing = TABLE_NAMES.map((t) => this.aggregator!.failure(t)).find((f) => f);
    const why = failing
      ? `writes to ${failing.table} are failing: ${failing.message}`
      : 'writes did not finish';
    const seconds = (this.init.stopFlushTimeoutMs ?? STOP_FLUSH_TIMEOUT_MS) / 1000;
    const where = this.wal
      ? 'they stay in the write-ahead log and are written at the next start'
      : 'with durability "memory" they are lost';
    this.logSink(
      this.wal ? 'warn' : 'error',
      `stopped with ${rows} accepted rows not written to their tables after ${seconds} s (${why}): ${where}`,
    );
  }

  /** Signal handlers and the exit hook, as the options ask. */
  private installHooks(): void {
    const o = this.options;
    const removers: (() => void)[] = [];
    if (o.install_signal_handlers && this.init.handleSignals !== false) {
      removers.push(stopOnSignals(() => this.stop({ flush: 'auto' })));
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

  /**
   * What is wrong right now, one line each, for /healthz (`status: degraded`) and `otelake
   * status`: tables whose writes fail (their rows are kept and retried), a failing write-ahead log,
   * a day whose shipping failed and waits for its retry (its local copy is kept).
   */
  problems(): string[] {
    const out: string[] = [];
    for (const f of this.aggregator?.stats().failing ?? []) {
      out.push(
        `writes to ${f.table} ${f.day} failing since ${f.since} (${f.attempts} attempts): ${f.message}`,
      );
    }
    const walError = this.wal?.stats().last_error;
    if (walError) out.push(`write-ahead log write failed at ${walError.at}: ${walError.message}`);
    for (const h of this.held.values()) out.push(heldProblem(h));
    for (const d of this.damaged.list()) {
      out.push(`the ${d.table} table of ${d.day} is damaged (found ${d.since}): ${d.reason}`);
    }
    const ship = this.shipper?.stats();
    if (ship?.state === 'waiting_retry' && ship.last_error) {
      const e = ship.last_error;
      out.push(
        `shipping ${e.day} failed at its ${e.step} step (${e.at}), retried at ${ship.next_retry_at}: ${e.message}`,
      );
    }
    return out;
  }

  stats(): LoggerStats {
    if (!this.producer || !this.aggregator)
      throw new Error('the logger is not ready yet: await logger.ready');
    return {
      // What this run does: "wal" with "memory" asked while rows of an earlier run are in the log.
      durability: this.wal ? 'wal' : 'memory',
      producer: this.producer.stats(),
      aggregator: this.aggregator.stats(),
      wal: this.wal?.stats() ?? null,
      damaged_tables: this.damaged.list(),
      shipper: this.shipper!.stats(),
    };
  }

  // ---- shipping ----------------------------------------------------------------------------

  private createShipper(opts: LoggerOptions): Shipper {
    return new Shipper({
      layout: this.layout,
      s3: this.s3,
      enabled: opts.shipper_enabled && this.init.autoShip !== false,
      deltaOptions: deltaOptions(opts.storage_config),
      memoryLimit: memoryLimit(opts.server_config.memory_limit_bytes).bytes,
      today: () => this.producer!.today(),
      whenDayLanded: (day) => this.whenDayLanded(day),
      releaseDay: (day) => this.releaseDay(day),
      tidyAtStart: this.init.autoShip !== false,
      report: (level, message) => this.logSink(level, message),
      ...(this.init.shipperTiming ? { timing: this.init.shipperTiming } : {}),
    });
  }

  /**
   * Seals, uploads, verifies and cleans a finished day now, from its last recorded phase (see
   * src/shipping/shipper.ts). Rejects with a ShipError for the current day, a future day, a day
   * without data or an incomplete S3 configuration; a failed step is in the summary.
   */
  async shipNow(day: string, opts: { onProgress?: (p: ShipProgress) => void } = {}): Promise<ShipSummary> {
    await this.ready;
    return this.shipper!.shipNow(day, opts);
  }

  /** Finished days not shipped (cleaned) yet, oldest first. */
  async unshippedDays(): Promise<string[]> {
    await this.ready;
    return this.shipper!.pendingDays();
  }

  /**
   * Resolves once every row of `day` accepted by this logger has landed in its Delta tables:
   * nothing of the day (or before) waiting for its write-ahead log write, in the producer queue,
   * in the aggregator's batches or in writes in flight. Rows the log holds from an earlier
   * process were queued by the replay at start, but for those of a table that did not open then:
   * while the day has such rows, this rejects. Only a past day can be waited for usefully (today
   * keeps receiving rows). Rejects when the logger stops meanwhile: a day must not be sealed while
   * a stop flushes it.
   */
  async whenDayLanded(day: string): Promise<void> {
    await this.ready;
    const producer = this.producer!;
    const aggregator = this.aggregator!;
    const capturing = () => [...this.capturing.keys()].some((d) => d <= day);
    const heldProblemOf = () => {
      for (const h of this.held.values()) if (h.day === day) return heldProblem(h);
      return null;
    };
    for (;;) {
      // Rows held since the start land only once their table opens: the seal fails (and is tried
      // again later) rather than wait for that.
      const held = heldProblemOf();
      if (held !== null) throw new Error(`day ${day} has not landed: ${held}`);
      if (!(capturing() || producer.holdsDayOrEarlier(day) || aggregator.pendingRowsOf(day) > 0)) return;
      if (this.state !== 'running') throw new Error(`the logger is ${this.state}: day ${day} has not landed`);
      await new Promise((r) => setTimeout(r, LANDED_POLL_MS));
    }
  }

  /** Counts rows captured for `day` whose write-ahead log write is under way (see whenDayLanded). */
  private capture(day: string, n: number): void {
    const left = (this.capturing.get(day) ?? 0) + n;
    if (left > 0) this.capturing.set(day, left);
    else this.capturing.delete(day);
  }

  /** Closes this logger's tables of a finished day (before it is sealed and before it is removed). */
  private async releaseDay(day: string): Promise<void> {
    const open = [...this.tables].filter(([key]) => key.endsWith(`/${day}`));
    for (const [key] of open) this.tables.delete(key);
    await Promise.all(open.map(([, t]) => t.then((dt) => dt.close()).catch(() => {})));
  }

  // ---- reads -------------------------------------------------------------------------------

  /**
   * Rows of one table, newest first (see ReadQuery); `returnAs: 'lazy'` gives a LazyDataFrame.
   * Rows are collected in memory up to `maxBytes` (default 256 MiB; ReadLimitError beyond);
   * aborting `signal` cancels the read.
   */
  read(
    table: TableName,
    query?: ReadQuery,
    opts?: { returnAs?: 'objects'; signal?: AbortSignal },
  ): Promise<Row[]>;
  read(
    table: TableName,
    query: ReadQuery | undefined,
    opts: { returnAs: 'lazy'; signal?: AbortSignal },
  ): Promise<LazyDataFrame>;
  read(
    table: TableName,
    query: ReadQuery = {},
    opts: { returnAs?: 'objects' | 'lazy'; signal?: AbortSignal } = {},
  ): Promise<Row[] | LazyDataFrame> {
    query = camelCaseArgs(query);
    return this.noteReadDamage(table, query, readTable(this.layout, table, query, { ...opts, s3: this.s3 }));
  }

  /** A read's outcome for the damaged-table list: a damaged table it met, or days it read cleanly. */
  private async noteReadDamage<T>(table: TableName, query: ReadQuery, reading: Promise<T>): Promise<T> {
    try {
      const out = await reading;
      await this.recheckReadDamage(table, query);
      return out;
    } catch (err) {
      this.noteReadFailure(err);
      throw err;
    }
  }

  private noteReadFailure(err: unknown): void {
    if (
      err instanceof DamagedTableError &&
      this.damaged.note(err.table, err.day, err.reason, 'read', err.file)
    )
      this.logSink('error', err.message);
  }

  /** After a read succeeded: the damage reads found in its days, checked again. */
  private async recheckReadDamage(table: TableName, query: ReadQuery): Promise<void> {
    for (const { day, file } of this.damaged.foundByReads(table, query.dateFrom, query.dateTo))
      await this.recheckDamage(table, day, file);
  }

  /**
   * Damage a read found, checked again: forgotten when the table's log opens and the damaged data
   * file is sound or no longer live (the file unknown: every live file is sound), or when the
   * day's table has left this disk. A read that succeeded is not enough: it may have skipped the
   * file (another project's rows, another time range).
   */
  private async recheckDamage(table: TableName, day: string, file: string | undefined): Promise<void> {
    const dir = this.layout.tableDir(day, table);
    let problem: string | null;
    try {
      const dt = await DeltaTable.open(dir);
      const live = file === undefined ? undefined : dt.files.find((f) => f.path === file);
      if (file === undefined) problem = (await dataFileProblems(dt)).values().next().value ?? null;
      else problem = live === undefined ? null : await dataFileProblem(dt.dir, live);
    } catch {
      // Its log still gives no snapshot, unless the table is gone (the day shipped and cleaned).
      const gone = await access(dir).then(
        () => false,
        () => true,
      );
      if (!gone) return;
      problem = null;
    }
    if (problem === null && this.damaged.clear(table, day))
      this.logSink('info', `the ${table} table of ${day} reads cleanly again`);
  }

  /**
   * The slices of rows of a read (see streamRows: each about `chunkBytes` of values, read when
   * the loop asks for it), with the values cut and the bytes of each. Shipped days are read with
   * the Logger's object-storage settings.
   */
  readChunks(
    table: TableName,
    query: ReadQuery = {},
    opts: Omit<StreamOptions, 's3'> = {},
  ): AsyncGenerator<ReadChunk, void, undefined> {
    query = camelCaseArgs(query);
    return this.noteStreamDamage(
      table,
      query,
      streamRows(this.layout, table, query, { ...opts, s3: this.s3 }),
    );
  }

  /** The slices of readChunks as the rows' JSON text (see streamJson); the HTTP reads use it. */
  readJsonChunks(
    table: TableName,
    query: ReadQuery = {},
    opts: Omit<StreamOptions, 's3'> = {},
  ): AsyncGenerator<JsonChunk, void, undefined> {
    query = camelCaseArgs(query);
    return this.noteStreamDamage(
      table,
      query,
      streamJson(this.layout, table, query, { ...opts, s3: this.s3 }),
    );
  }

  /** A read's slices, noting a damaged table it met, or that its days read whole again. */
  private async *noteStreamDamage<C>(
    table: TableName,
    query: ReadQuery,
    slices: AsyncGenerator<C, void, undefined>,
  ): AsyncGenerator<C, void, undefined> {
    try {
      yield* slices;
    } catch (err) {
      this.noteReadFailure(err);
      throw err;
    }
    await this.recheckReadDamage(table, query);
  }

  /**
   * Rows of one table in the same order, read a slice at a time as the loop takes them: memory
   * holds one slice (about 4 MiB of values), whatever the size of the answer.
   */
  async *readStream(
    table: TableName,
    query: ReadQuery = {},
    opts: { signal?: AbortSignal } = {},
  ): AsyncGenerator<Row, void, undefined> {
    for await (const chunk of this.readChunks(table, query, opts)) yield* chunk.rows;
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

  private async readWith<A extends ReadArgs>(table: TableName, q: A | undefined): Promise<ReadOutput<A>> {
    // The specification's names (date_from, max_rows, return_as, ...) are taken as well.
    const { returnAs, signal, ...query } = camelCaseArgs(q ?? ({} as A));
    // readTable checks returnAs (and rejects an invalid one).
    const out = readTable(this.layout, table, query, {
      returnAs: returnAs ?? 'objects',
      s3: this.s3,
      ...(signal ? { signal } : {}),
    });
    return this.noteReadDamage(table, query, out) as Promise<ReadOutput<A>>; // returnAs decides which
  }
}

export type ReadArgs = ReadQuery & { returnAs?: 'objects' | 'lazy'; signal?: AbortSignal };

/** What a read helper resolves to: plain rows, or a LazyDataFrame with `returnAs: 'lazy'`. */
export type ReadOutput<A extends ReadArgs> = A extends { returnAs: 'lazy' } ? LazyDataFrame : Row[];
