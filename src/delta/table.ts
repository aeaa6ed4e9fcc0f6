// A Delta Lake table (protocol reader 1 / writer 2) on the local filesystem: create, append one
// Parquet file per append (a batch, or batches joined) with one atomic commit, snapshot by log
// replay from the latest checkpoint, checkpoints, OPTIMIZE, VACUUM and in-day compaction. Its
// decisions: src/delta/README.md.
//
// Atomicity: a commit is written to a temporary file and hard-linked to its final name; EEXIST
// means another writer took that version, so the log is re-read and the next version tried. A
// writer killed at any moment leaves at most an unreferenced data file or temporary file.

import { randomUUID } from 'node:crypto';
import { link, mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import type { TableSchema } from '../schema/tables.ts';
import { siblingModule, WORKER_IDLE_MS, WorkerPool } from '../storage/worker-pool.ts';
import { VERSION } from '../version.ts';
import {
  type Action,
  type AddAction,
  type CommitInfo,
  CREATED_LOG_RETENTION,
  CREATED_TOMBSTONE_RETENTION,
  checkpointFileName,
  commitContent,
  commitFileName,
  DEFAULT_LOG_RETENTION_MS,
  DEFAULT_TOMBSTONE_RETENTION_MS,
  LAST_CHECKPOINT,
  LOG_DIR,
  type MetadataAction,
  type ProtocolAction,
  parseCheckpointVersion,
  parseCommit,
  parseCommitVersion,
  parseIntervalMs,
  type RemoveAction,
  TEMP_PREFIXES,
  type TxnAction,
} from './actions.ts';
import { type Batches, batchesRows, transferables } from './batch.ts';
import type { CheckpointContent } from './checkpoint.ts';
import type {
  CheckpointTask,
  CompactedFile,
  CompactTask,
  JoinPlan,
  WriteBatchTask,
  WrittenBatch,
} from './parquet-worker.ts';
import { deltaSchemaString, schemaFromDelta } from './schema-string.ts';
import { type FileStats, mergeStats, parseStats, statsToJson } from './stats.ts';

export interface DeltaOptions {
  /** A checkpoint is written after every N commits (at versions N, 2N, ...). Default 100. */
  checkpointInterval?: number;
  /** zstd level of data files. Default 3. */
  zstdLevel?: number;
  /**
   * In-day compaction after appends: files below `smallFileRows` rows are grouped in size tiers
   * (a tier spans a factor of `minFiles` in rows); the oldest `minFiles` files of a tier, or fewer
   * once they hold `smallFileRows` rows, are compacted into one file. This bounds the file count
   * under sustained small appends, and the work of one compaction. Null = off (default).
   * When every row group of a group's files has at least `copyRowGroupsFrom` rows (default
   * 8,192), the row groups are copied into the new file as they are, which costs a file copy
   * instead of a rewrite; smaller ones (many small row groups read slowly) are merged into larger
   * ones page by page if this engine wrote the files, else rewritten. OPTIMIZE always rewrites.
   */
  autoCompact?: { minFiles: number; smallFileRows: number; copyRowGroupsFrom?: number } | null;
  /** `engineInfo` written into commitInfo. */
  engineInfo?: string;
  /** Rows per Parquet row group. Default 131072. */
  rowGroupSize?: number;
  /** fsync data files and commits before they become visible (survives power loss). Default true. */
  fsync?: boolean;
  /**
   * After each checkpoint, delete log entries older than the newest checkpoint written at least
   * this long ago (cleanupLog). Default: the table's `delta.logRetentionDuration`, else 30 days.
   * Null = never.
   */
  logRetentionMs?: number | null;
  /**
   * Where the failure of a background task (an in-day compaction, a checkpoint, the deletion of
   * replaced files) is told, with the task's name; each is tried again later. Default: a process
   * warning (DeltaWarning).
   */
  onBackgroundError?: (task: BackgroundTask, err: Error) => void;
}

export type BackgroundTask = 'compaction' | 'checkpoint' | 'deleting replaced files';

/** A live data file of the current snapshot. */
export interface AddFile {
  /** Path relative to the table root, as written in the log (URI-encoded). */
  readonly path: string;
  readonly size: number;
  readonly modificationTime: number;
  readonly dataChange: boolean;
  /** Rows in the file (from its stats; -1 when the file has no stats). */
  readonly numRecords: number;
  /** Typed stats (see stats.ts for the value types), null when absent. */
  readonly stats: FileStats | null;
}

export interface AppendResult {
  version: number;
  /** Absolute path of the data file written ('' when the batch was empty). */
  path: string;
  rows: number;
}

/** A data file written by `writeFile` and not yet committed. */
export interface DataFile {
  /** File name under the table root. */
  readonly name: string;
  readonly rows: number;
  readonly size: number;
  readonly modificationTime: number;
  readonly stats: FileStats;
}

/** A `txn` action: the application `appId` has applied everything up to `version`. */
export interface TxnMark {
  appId: string;
  version: number;
}

export interface OptimizeResult {
  removed: number;
  added: number;
  version: number;
}

export class DeltaConflictError extends Error {
  override name = 'DeltaConflictError';
}

/**
 * The table's log cannot be read into a snapshot: a commit that is not valid JSON, a missing
 * commit, no readable checkpoint or commit to start from, another table's schema. Retrying does
 * not help; the table needs repair (`otelake check` says how).
 */
export class DeltaLogError extends Error {
  override name = 'DeltaLogError';
}

/** A checkpoint the snapshot was not built from because it cannot be read (see loadState). */
export interface UnreadableCheckpoint {
  version: number;
  message: string;
}

const ENGINE_INFO = `otelake/${VERSION}`;

/** A checkpoint's content, and the removals it let expire (their files go once it is written). */
interface CapturedCheckpoint {
  version: number;
  content: CheckpointContent;
  expired: RemoveAction[];
}
/** A commit of a written file is tried this often, waiting COMMIT_RETRY_MS, then twice as long... */
const COMMIT_ATTEMPTS = 8;
const COMMIT_RETRY_MS = 100;
const DEFAULT_ROW_GROUP = 131_072;
/** In-day compaction copies row groups of at least this many rows (DeltaOptions.autoCompact). */
const DEFAULT_COPY_ROW_GROUPS_FROM = 8192;
/** A compaction that rewrites its inputs' rows (polars). */
const REWRITE: JoinPlan = { copyRowGroupsFrom: null, mergeRowGroups: false };
/** One that joins its inputs' row groups page by page into row groups of `rowGroupSize` where it can. */
const MERGE: JoinPlan = { copyRowGroupsFrom: null, mergeRowGroups: true };
/**
 * After a failed in-day compaction the next waits this long: a failure that repeats (an input it
 * cannot read, a full disk) would otherwise start over at once, again and again, on a full core.
 */
const COMPACT_RETRY_MS = 5_000;
/** A reader this many commits behind the latest checkpoint reloads from it instead of replaying. */
const RELOAD_AFTER_COMMITS = 200;

// ---------------------------------------------------------------------------------------------
// Shared worker pool.

let pool: WorkerPool | null = null;

/**
 * Young generation of a Parquet worker. V8 starts a full GC when the old generation's free room
 * (less the ArrayBuffers allocated since the last one: each file's parts arrive as new ones) falls
 * below the young generation's size; with the default size a busy server's worker ran 9-14 full
 * GCs a second on an 11 MB heap. Capped, half as many: V8's helper threads took 21-30% of a core
 * instead of 29-37%, and spans/s rose from 56-74k to 68-80k (A/B, 4 pairs).
 */
const PARQUET_YOUNG_GENERATION_MB = 4;
/** How long a task waits for the busy Parquet worker before a second one starts. */
const PARQUET_SPARE_AFTER_MS = 1000;

function deltaPool(): WorkerPool {
  if (!pool) {
    pool = new WorkerPool(siblingModule(import.meta.url, 'parquet-worker'), {
      name: 'otelake-parquet',
      size: Math.max(1, Math.min(2, availableParallelism())),
      // Only a compaction may load polars, whose native memory goes back only when V8 collects:
      // replacing the worker every 256 writes cost ~130 ms of CPU in its first 250 ms each time
      // (every ~15 s at full load), a burst beside the event loop's requests.
      recycleAfter: 256,
      recycleTasks: ['compact'],
      resourceLimits: { maxYoungGenerationSizeMb: PARQUET_YOUNG_GENERATION_MB },
      // One worker keeps up with ingest (its files and in-day compactions): under load a second
      // one gave the same throughput and 80-130 MiB more peak RSS. A second starts when a task
      // has waited PARQUET_SPARE_AFTER_MS, e.g. behind a sealed day's OPTIMIZE.
      spareAfterMs: PARQUET_SPARE_AFTER_MS,
      idleMs: WORKER_IDLE_MS,
    });
  }
  return pool;
}

/**
 * Starts the Parquet worker if none is running, as rows come: the first write after a start, or
 * after it stopped idle, would otherwise wait 0.3-0.5 s for it to load, and a burst of ingest with
 * it (the queue fills meanwhile).
 */
export function warmDeltaWorkers(): void {
  deltaPool().warm();
}

/** Stops the shared Parquet worker pool (it restarts on the next write). */
export async function closeDeltaWorkers(): Promise<void> {
  const p = pool;
  pool = null;
  if (p) await p.close();
}

// ---------------------------------------------------------------------------------------------
// Per-directory serialization of commits inside this process (several DeltaTable objects may
// point at the same table).

const lanes = new Map<string, Promise<void>>();

function inLane<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const prev = lanes.get(key) ?? Promise.resolve();
  const run = prev.then(fn);
  const tail = run.then(
    () => {},
    () => {},
  );
  lanes.set(key, tail);
  void tail.then(() => {
    if (lanes.get(key) === tail) lanes.delete(key);
  });
  return run;
}

// ---------------------------------------------------------------------------------------------
// Log state.

class LogState {
  version = -1;
  protocol: ProtocolAction | null = null;
  metaData: MetadataAction | null = null;
  /** Live adds by path, in log order. */
  readonly adds = new Map<string, AddAction>();
  readonly removes = new Map<string, RemoveAction>();
  readonly txns = new Map<string, TxnAction>();
  /** Checkpoints newer than the one this state started from, skipped as unreadable. */
  unreadableCheckpoints: UnreadableCheckpoint[] = [];
  /** `commitInfo.timestamp` of `version`; null when unknown (e.g. loaded from a checkpoint). */
  timestamp: number | null = null;

  apply(action: Action): void {
    if (action.add) {
      this.removes.delete(action.add.path);
      this.adds.delete(action.add.path); // a re-add moves to the end
      this.adds.set(action.add.path, action.add);
    } else if (action.remove) {
      this.adds.delete(action.remove.path);
      this.removes.set(action.remove.path, action.remove);
    } else if (action.metaData) this.metaData = action.metaData;
    else if (action.protocol) this.protocol = action.protocol;
    else if (action.txn) this.txns.set(action.txn.appId, action.txn);
    else if (typeof action.commitInfo?.timestamp === 'number') this.timestamp = action.commitInfo.timestamp;
  }
}

/** The error of a failed append, carrying the batch handed back by the worker (if it was). */
function withBatch(err: unknown, batch: Batches | undefined): unknown {
  if (batch !== undefined && err instanceof Error) Object.assign(err, { batch });
  return err;
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/** Deletes a file; false when it was already gone. */
async function unlinkIfExists(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errCode(err) !== 'ENOENT') throw err;
    return false;
  }
}

async function readIfExists(path: string): Promise<Buffer | null> {
  try {
    return await readFile(path);
  } catch (err) {
    if (errCode(err) === 'ENOENT') return null;
    throw err;
  }
}

/** Writes a new file; `mtimeMs` sets its modification time (a commit's file carries its time). */
async function writeFileSynced(path: string, data: string, sync: boolean, mtimeMs?: number): Promise<void> {
  const fh = await open(path, 'wx');
  try {
    await fh.writeFile(data);
    if (mtimeMs !== undefined) {
      // In seconds as a double: aim at the middle of the millisecond, so that rounding on the
      // way to nanoseconds never lands in the one before.
      const seconds = (mtimeMs + 0.5) / 1000;
      await fh.utimes(seconds, seconds);
    }
    if (sync) await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Where a Delta log is read from: a local `_delta_log` folder, or a shipped table's log in object
 * storage (src/storage/object-store.ts). Snapshots are built the same way from either.
 */
export interface LogStore {
  /** File names in the log folder; empty when it does not exist. */
  names(): Promise<string[]>;
  /** A file of the log folder, or null when it does not exist. */
  read(name: string): Promise<Uint8Array | null>;
  /** The log's location, for messages. */
  readonly where: string;
}

/** The log store of a local `_delta_log` folder. */
export function localLogStore(logDir: string): LogStore {
  return {
    where: logDir,
    names: async () => {
      try {
        return await readdir(logDir);
      } catch (err) {
        if (errCode(err) === 'ENOENT') return [];
        throw err;
      }
    },
    read: (name) => readIfExists(join(logDir, name)),
  };
}

async function readLastCheckpointVersion(store: LogStore): Promise<number | null> {
  const buf = await store.read(LAST_CHECKPOINT);
  if (!buf) return null;
  try {
    const v = (JSON.parse(UTF8.decode(buf)) as { version?: unknown }).version;
    return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null;
  } catch {
    return null;
  }
}

const UTF8 = new TextDecoder();

/** What one listing of a `_delta_log` folder holds. */
export interface LogListing {
  /** Commit versions, oldest first. */
  commits: number[];
  /** Checkpoint versions, newest first. */
  checkpoints: number[];
  /** Whether `_last_checkpoint` is present (readers key their cached snapshots on it too). */
  lastCheckpoint: boolean;
}

/** Lists a log folder (a path, or any log store); a missing folder lists empty. */
export async function listLog(log: string | LogStore): Promise<LogListing> {
  const names = await (typeof log === 'string' ? localLogStore(log) : log).names();
  const commits: number[] = [];
  const checkpoints: number[] = [];
  let lastCheckpoint = false;
  for (const n of names) {
    const c = parseCommitVersion(n);
    if (c !== null) commits.push(c);
    const k = parseCheckpointVersion(n);
    if (k !== null) checkpoints.push(k);
    if (n === LAST_CHECKPOINT) lastCheckpoint = true;
  }
  commits.sort((a, b) => a - b);
  checkpoints.sort((a, b) => b - a);
  return { commits, checkpoints, lastCheckpoint };
}

/** Applies commits after `state.version` until the next one does not exist yet. */
async function replayCommits(store: LogStore, state: LogState): Promise<number> {
  let applied = 0;
  for (;;) {
    const v = state.version + 1;
    const buf = await store.read(commitFileName(v));
    if (!buf) return applied;
    state.timestamp = null;
    let actions: Action[];
    try {
      actions = parseCommit(UTF8.decode(buf), v);
    } catch (err) {
      throw new DeltaLogError((err as Error).message);
    }
    for (const a of actions) state.apply(a);
    state.version = v;
    applied++;
  }
}

/**
 * Whether checkpoints are decoded in the Parquet worker rather than the calling thread: on for a
 * process that ingests (a Logger turns it on), whose event loop answers requests. Loading
 * apache-arrow and parquet-wasm and decoding a day's checkpoints held it up to 160-190 ms at a
 * seal (50 ms once loaded). Off for readers, which run off any request loop already.
 */
let decodeOffThread = false;

export function decodeCheckpointsOffThread(on: boolean): void {
  decodeOffThread = on;
}

async function decodeCheckpointBytes(buf: Uint8Array): Promise<Action[]> {
  if (!decodeOffThread) {
    // apache-arrow and parquet-wasm (~40 MiB) are loaded by the first checkpoint read only.
    const { decodeCheckpoint } = await import('./checkpoint.ts');
    return decodeCheckpoint(buf);
  }
  const own = buf.byteOffset === 0 && buf.byteLength === buf.buffer.byteLength ? buf : new Uint8Array(buf);
  return deltaPool().run<Action[]>('readCheckpoint', own, [own.buffer as ArrayBuffer]);
}

/**
 * The table's latest snapshot: the newest readable checkpoint, then the commits after it. An
 * unreadable checkpoint is skipped (listed in `unreadableCheckpoints`) for an older one or the
 * commits; a log that gives no snapshot throws a DeltaLogError.
 */
async function loadState(store: LogStore): Promise<LogState> {
  // _last_checkpoint first: the checkpoint it names was written before it.
  const hinted = await readLastCheckpointVersion(store);
  const listing = await listLog(store);
  const candidates = [...new Set([...(hinted === null ? [] : [hinted]), ...listing.checkpoints])].sort(
    (a, b) => b - a,
  );
  let state = new LogState();
  const unreadable: UnreadableCheckpoint[] = [];
  for (const cp of candidates) {
    const buf = await store.read(checkpointFileName(cp));
    if (!buf) {
      if (cp === hinted)
        unreadable.push({ version: cp, message: `${LAST_CHECKPOINT} names it, but it is missing` });
      continue;
    }
    try {
      const s = new LogState();
      for (const a of await decodeCheckpointBytes(buf)) s.apply(a);
      if (!s.metaData || !s.protocol) throw new Error('it has no protocol or metaData action');
      s.version = cp;
      state = s;
      break;
    } catch (err) {
      // An unreadable checkpoint: fall back to an older one, or to the commits.
      unreadable.push({ version: cp, message: (err as Error).message });
    }
  }
  state.unreadableCheckpoints = unreadable;
  const skipped = unreadable.map((u) => `; checkpoint ${u.version} is unreadable (${u.message})`).join('');
  await replayCommits(store, state);
  const table = dirname(store.where);
  if (state.version < 0 || !state.metaData || !state.protocol) {
    throw new DeltaLogError(`${table} is not a Delta table (no readable _delta_log)${skipped}`);
  }
  const newest = listing.commits.at(-1);
  if (newest !== undefined && newest > state.version) {
    throw new DeltaLogError(
      `Delta log of ${table} is missing commit ${state.version + 1} (newest is ${newest})${skipped}`,
    );
  }
  return state;
}

/** A table's latest snapshot, read-only, from any log store (e.g. a shipped table in object storage). */
export interface TableSnapshot {
  version: number;
  schema: TableSchema;
  /** Live data files, in log order. */
  files: AddFile[];
}

export async function readSnapshot(store: LogStore): Promise<TableSnapshot> {
  const state = await loadState(store);
  const meta = state.metaData!;
  const schema = schemaFromDelta(meta.schemaString, meta.name ?? basename(dirname(store.where)));
  return { version: state.version, schema, files: [...state.adds.values()].map((a) => toAddFile(a, schema)) };
}

function toAddFile(add: AddAction, schema: TableSchema): AddFile {
  const stats = parseStats(schema, add.stats);
  return {
    path: add.path,
    size: add.size,
    modificationTime: add.modificationTime,
    dataChange: add.dataChange,
    numRecords: stats?.numRecords ?? -1,
    stats,
  };
}

/** A commit's `commitInfo` without its `timestamp`, which `DeltaTable.commit` adds. */
function commitInfo(
  operation: string,
  operationParameters: Record<string, string>,
  engineInfo: string,
  extra: Record<string, unknown> = {},
): CommitInfo {
  return { operation, operationParameters, engineInfo, ...extra };
}

/**
 * The time of commit `version` as found on disk: its `commitInfo.timestamp`, else its file's
 * modification time, else (log cleaned up) its checkpoint's; 0 when none is there.
 */
async function commitTimeOnDisk(logDir: string, version: number): Promise<number> {
  const path = join(logDir, commitFileName(version));
  const buf = await readIfExists(path);
  if (buf) {
    for (const a of parseCommit(buf.toString('utf8'), version)) {
      if (typeof a.commitInfo?.timestamp === 'number') return a.commitInfo.timestamp;
    }
  }
  const st =
    (await stat(path).catch(() => null)) ??
    (await stat(join(logDir, checkpointFileName(version))).catch(() => null));
  return st ? Math.floor(st.mtimeMs) : 0;
}

/** Size tier of a small file for auto-compaction: files within a factor `base` share a tier. */
function sizeTier(rows: number, base: number): number {
  return rows <= 1 ? 0 : Math.floor(Math.log(rows) / Math.log(base) + 1e-9);
}

// ---------------------------------------------------------------------------------------------

export class DeltaTable {
  readonly dir: string;
  readonly schema: TableSchema;
  private readonly logDir: string;
  private readonly logStore: LogStore;
  private readonly opts: Required<
    Omit<DeltaOptions, 'autoCompact' | 'logRetentionMs' | 'onBackgroundError'>
  > & {
    autoCompact: DeltaOptions['autoCompact'];
    logRetentionMs: number | null;
    onBackgroundError: DeltaOptions['onBackgroundError'];
  };
  private state: LogState;
  private readonly parsed = new Map<string, AddFile>();
  private filesCache: AddFile[] | null = null;
  /** Data files being written by this process and not yet committed (vacuum must not touch). */
  private readonly inFlight = new Set<string>();
  private compactionLane: Promise<unknown> = Promise.resolve();
  private compacting = false;
  /** No in-day compaction starts before this time (COMPACT_RETRY_MS after a failed one). */
  private compactHeldUntil = 0;
  private checkpointLane: Promise<unknown> = Promise.resolve();
  private lastCheckpointed = -1;
  private readonly pending = new Set<Promise<unknown>>();
  private closed = false;
  /** Errors of background work (auto checkpoints and compactions); they never fail an append. */
  readonly backgroundErrors: Error[] = [];

  private constructor(dir: string, schema: TableSchema, state: LogState, opts: DeltaOptions) {
    this.dir = dir;
    this.schema = schema;
    this.logDir = join(dir, LOG_DIR);
    this.logStore = localLogStore(this.logDir);
    this.state = state;
    this.opts = {
      checkpointInterval: opts.checkpointInterval ?? 100,
      zstdLevel: opts.zstdLevel ?? 3,
      autoCompact: opts.autoCompact ?? null,
      engineInfo: opts.engineInfo ?? ENGINE_INFO,
      rowGroupSize: opts.rowGroupSize ?? DEFAULT_ROW_GROUP,
      fsync: opts.fsync ?? true,
      onBackgroundError: opts.onBackgroundError,
      logRetentionMs:
        opts.logRetentionMs === undefined
          ? parseIntervalMs(
              state.metaData!.configuration['delta.logRetentionDuration'],
              DEFAULT_LOG_RETENTION_MS,
            )
          : opts.logRetentionMs,
    };
    if (!Number.isSafeInteger(this.opts.checkpointInterval) || this.opts.checkpointInterval < 1)
      throw new TypeError('checkpointInterval must be a positive integer');
    const ac = this.opts.autoCompact;
    if (ac && (!Number.isSafeInteger(ac.minFiles) || ac.minFiles < 2 || !(ac.smallFileRows > 0)))
      throw new TypeError('autoCompact needs minFiles >= 2 and smallFileRows > 0');
  }

  /** Opens the table at `dir`, creating it (version 0: protocol + metaData) when it has no log. */
  static async createOrOpen(dir: string, schema: TableSchema, opts: DeltaOptions = {}): Promise<DeltaTable> {
    const root = resolve(dir);
    const logDir = join(root, LOG_DIR);
    const schemaString = deltaSchemaString(schema);
    // After log cleanup version 0 is gone, but any commit or checkpoint means the table exists.
    const listing = await listLog(logDir);
    if (listing.commits.length === 0 && listing.checkpoints.length === 0) {
      await mkdir(logDir, { recursive: true });
      const now = Date.now();
      const info = commitInfo(
        'CREATE TABLE',
        { mode: 'ErrorIfExists', partitionBy: '[]' },
        opts.engineInfo ?? ENGINE_INFO,
      );
      const actions: Action[] = [
        { commitInfo: { timestamp: now, ...info } },
        { protocol: { minReaderVersion: 1, minWriterVersion: 2 } },
        {
          metaData: {
            id: randomUUID(),
            name: schema.name,
            format: { provider: 'parquet', options: {} },
            schemaString,
            partitionColumns: [],
            configuration: {
              // Stats cover every column; without this readers use only the first 32 columns' stats.
              'delta.dataSkippingNumIndexedCols': '-1',
              'delta.deletedFileRetentionDuration': CREATED_TOMBSTONE_RETENTION,
              'delta.logRetentionDuration': CREATED_LOG_RETENTION,
            },
            createdTime: now,
          },
        },
      ];
      const tmp = join(logDir, `${TEMP_PREFIXES[0]}${randomUUID()}.json.tmp`);
      await writeFileSynced(
        tmp,
        commitContent(actions.map((a) => JSON.stringify(a))),
        opts.fsync ?? true,
        now,
      );
      try {
        await link(tmp, join(logDir, commitFileName(0)));
      } catch (err) {
        if (errCode(err) !== 'EEXIST') throw err; // created concurrently: open it
      } finally {
        await unlink(tmp).catch(() => {});
      }
    }
    const state = await loadState(localLogStore(join(root, LOG_DIR)));
    const found = state.metaData!.schemaString;
    if (found !== schemaString) {
      throw new DeltaLogError(
        `Delta table ${root} has a different schema than ${schema.name}: ${found} (expected ${schemaString})`,
      );
    }
    return new DeltaTable(root, schema, state, opts);
  }

  /** Opens an existing table (e.g. read-only by another process); its schema comes from the log. */
  static async open(dir: string, opts: DeltaOptions = {}): Promise<DeltaTable> {
    const root = resolve(dir);
    const state = await loadState(localLogStore(join(root, LOG_DIR)));
    const schema = schemaFromDelta(state.metaData!.schemaString, state.metaData!.name ?? basename(root));
    return new DeltaTable(root, schema, state, opts);
  }

  get version(): number {
    return this.state.version;
  }

  /** Checkpoints newer than the snapshot's base that could not be read (a new checkpoint mends them). */
  get unreadableCheckpoints(): readonly UnreadableCheckpoint[] {
    return this.state.unreadableCheckpoints;
  }

  get metadata(): Readonly<MetadataAction> {
    return this.state.metaData!;
  }

  get files(): readonly AddFile[] {
    if (!this.filesCache) {
      const out: AddFile[] = [];
      for (const add of this.state.adds.values()) {
        let f = this.parsed.get(add.path);
        if (!f) {
          f = toAddFile(add, this.schema);
          this.parsed.set(add.path, f);
        }
        out.push(f);
      }
      this.filesCache = out;
    }
    return this.filesCache;
  }

  /** Absolute paths of the live data files. */
  liveFilePaths(): string[] {
    return this.files.map((f) => this.absolute(f.path));
  }

  rowCount(): number {
    let n = 0;
    for (const f of this.files) {
      if (f.numRecords < 0) throw new Error(`data file ${f.path} has no row count in its stats`);
      n += f.numRecords;
    }
    return n;
  }

  /** Picks up commits made by other processes (or other DeltaTable objects). */
  refresh(): Promise<void> {
    return inLane(this.dir, () => this.catchUp());
  }

  private absolute(path: string): string {
    return join(this.dir, decodeURIComponent(path));
  }

  private changed(): void {
    this.filesCache = null;
  }

  private async catchUp(): Promise<void> {
    const latestCheckpoint = await readLastCheckpointVersion(this.logStore);
    if (latestCheckpoint !== null && latestCheckpoint - this.state.version > RELOAD_AFTER_COMMITS) {
      return this.reload();
    }
    const before = new Set(this.state.adds.keys());
    if ((await replayCommits(this.logStore, this.state)) > 0) {
      for (const p of before) if (!this.state.adds.has(p)) this.parsed.delete(p);
      this.changed();
    }
    // Log cleanup may have removed the commits after our version: the checkpoint holds them.
    if (latestCheckpoint !== null && latestCheckpoint > this.state.version) await this.reload();
  }

  private async reload(): Promise<void> {
    this.state = await loadState(this.logStore);
    this.parsed.clear();
    this.changed();
  }

  private assertWritable(): void {
    if (this.closed) throw new Error(`Delta table ${this.dir} is closed`);
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.pending.add(p);
    void p.then(
      () => this.pending.delete(p),
      () => this.pending.delete(p),
    );
    return p;
  }

  private background(task: BackgroundTask, p: Promise<unknown>): void {
    this.track(p.catch((err: Error) => this.noteBackgroundError(task, err)));
  }

  private noteBackgroundError(task: BackgroundTask, err: Error): void {
    this.backgroundErrors.push(err);
    if (this.backgroundErrors.length > 20) this.backgroundErrors.shift();
    if (this.opts.onBackgroundError) this.opts.onBackgroundError(task, err);
    else process.emitWarning(`Delta ${task} failed for ${this.dir}: ${err.message}`, 'DeltaWarning');
  }

  /**
   * Commits `info` and `actions` as the next version. On EEXIST the log is re-read; `mustBeLive`
   * paths (inputs of a compaction) must still be live, otherwise the commit is abandoned.
   */
  private async commit(
    info: CommitInfo,
    actions: readonly Action[],
    mustBeLive: readonly string[] = [],
  ): Promise<number> {
    const lines = actions.map((a) => JSON.stringify(a));
    for (;;) {
      for (const p of mustBeLive) {
        if (!this.state.adds.has(p))
          throw new DeltaConflictError(`file ${p} was removed by a concurrent commit`);
      }
      const version = this.state.version + 1;
      const timestamp = await this.nextCommitTime();
      const content = commitContent([JSON.stringify({ commitInfo: { timestamp, ...info } }), ...lines]);
      const tmp = join(this.logDir, `${TEMP_PREFIXES[0]}${randomUUID()}.json.tmp`);
      try {
        await writeFileSynced(tmp, content, this.opts.fsync, timestamp);
        await link(tmp, join(this.logDir, commitFileName(version)));
      } catch (err) {
        if (errCode(err) !== 'EEXIST') throw err;
        await this.catchUp(); // another writer took this version
        continue;
      } finally {
        await unlink(tmp).catch(() => {});
      }
      for (const a of actions) {
        if (a.remove) this.parsed.delete(a.remove.path);
        this.state.apply(a);
      }
      this.state.version = version;
      this.state.timestamp = timestamp;
      this.changed();
      return version;
    }
  }

  /**
   * The next commit's time: now, but always after the previous commit's, so that history and time
   * travel by timestamp never go backwards (commits within one millisecond, a clock stepping
   * back). The commit file's modification time is set to it as well: readers without in-commit
   * timestamps (Spark) take a commit's time from its file.
   */
  private async nextCommitTime(): Promise<number> {
    this.state.timestamp ??= await commitTimeOnDisk(this.logDir, this.state.version);
    return Math.max(Date.now(), this.state.timestamp + 1);
  }

  /**
   * Writes the batch (or the batches, one after another) as one Parquet file and commits it.
   * Commits happen in call order. With `transfer`, the batches' buffers move to the worker
   * instead of being copied (the batch objects are unusable afterwards); when the write fails,
   * the rejection's `batch` holds the rows handed back, so that the caller can retry them. Once
   * the file is written and synced it is the durable copy: a failed commit is retried with it
   * (COMMIT_ATTEMPTS times, backing off), and only then does the append fail, without a batch.
   */
  append(batch: Batches, opts: { transfer?: boolean; txn?: TxnMark } = {}): Promise<AppendResult> {
    const writing = this.writeFile(batch, opts);
    writing.catch(() => {}); // awaited below, inside the lane
    const committed = inLane(this.dir, async (): Promise<AppendResult> => {
      const file = await writing;
      if (file === null) return { version: this.version, path: '', rows: 0 };
      for (let attempt = 1; ; attempt++) {
        try {
          const version = await this.commitNow([file], opts.txn);
          return { version, path: this.absolute(file.name), rows: file.rows };
        } catch (err) {
          if (attempt >= COMMIT_ATTEMPTS || this.closed) {
            this.inFlight.delete(file.name);
            throw err;
          }
          await new Promise((r) => setTimeout(r, COMMIT_RETRY_MS * 2 ** (attempt - 1)));
        }
      }
    });
    return this.track(committed);
  }

  /**
   * Writes the batch (or the batches, one after another) as one synced Parquet file that is not
   * yet part of the table (null for no rows): `commitFiles` adds it, `discardFile` deletes it.
   * Until then VACUUM leaves it alone. `transfer` as for `append`: a failed write rejects with an
   * error whose `batch` holds the rows handed back, when the worker could hand them back.
   */
  writeFile(batch: Batches, opts: { transfer?: boolean } = {}): Promise<DataFile | null> {
    const rows = batchesRows(batch);
    try {
      this.assertWritable();
    } catch (err) {
      return Promise.reject(err);
    }
    if (rows === 0) return Promise.resolve(null);
    const name = `part-${randomUUID()}.zstd.parquet`;
    const abs = join(this.dir, name);
    this.inFlight.add(name);
    const task: WriteBatchTask = {
      table: this.schema.name,
      path: abs,
      columns: this.schema.columns,
      batch,
      zstdLevel: this.opts.zstdLevel,
      rowGroupSize: this.opts.rowGroupSize,
      fsync: this.opts.fsync,
    };
    const written = deltaPool()
      .run<WrittenBatch>('writeBatch', task, opts.transfer ? transferables(batch) : [])
      .then(
        (w): DataFile => ({ name, rows, size: w.size, modificationTime: w.modificationTime, stats: w.stats }),
        async (err: unknown) => {
          this.inFlight.delete(name);
          await unlink(abs).catch(() => {});
          throw withBatch(err, (err as { returned?: Batches }).returned);
        },
      );
    return this.track(written);
  }

  /**
   * Commits written files as one version (with `txn`, Delta's idempotent-append marker), after
   * the commits asked for before it. A failure leaves the files written and uncommitted: the
   * caller may commit them again or discard them.
   */
  commitFiles(files: readonly DataFile[], opts: { txn?: TxnMark } = {}): Promise<number> {
    try {
      this.assertWritable();
    } catch (err) {
      return Promise.reject(err);
    }
    return this.track(inLane(this.dir, () => this.commitNow(files, opts.txn)));
  }

  /** Deletes a written file that will not be committed. */
  async discardFile(file: DataFile): Promise<void> {
    this.inFlight.delete(file.name);
    await unlink(this.absolute(file.name)).catch(() => {});
  }

  /** The version recorded by the latest `txn` of `appId`, or null when it has none. */
  txnVersion(appId: string): number | null {
    return this.state.txns.get(appId)?.version ?? null;
  }

  /** Commits the files now: call it inside the table's lane. */
  private async commitNow(files: readonly DataFile[], txn: TxnMark | undefined): Promise<number> {
    let rows = 0;
    let bytes = 0;
    const adds: AddAction[] = files.map((f) => {
      rows += f.rows;
      bytes += f.size;
      return {
        path: f.name,
        partitionValues: {},
        size: f.size,
        modificationTime: f.modificationTime,
        dataChange: true,
        stats: statsToJson(this.schema, f.stats),
      };
    });
    const info = commitInfo('WRITE', { mode: 'Append', partitionBy: '[]' }, this.opts.engineInfo, {
      isBlindAppend: true,
      operationMetrics: {
        numFiles: String(files.length),
        numOutputRows: String(rows),
        numOutputBytes: String(bytes),
      },
    });
    const actions: Action[] = [
      ...(txn ? [{ txn: { appId: txn.appId, version: txn.version, lastUpdated: Date.now() } }] : []),
      ...adds.map((add) => ({ add })),
    ];
    const version = await this.commit(info, actions);
    for (const f of files) {
      this.inFlight.delete(f.name);
      this.parsed.set(f.name, {
        path: f.name,
        size: f.size,
        modificationTime: f.modificationTime,
        dataChange: true,
        numRecords: f.rows,
        stats: f.stats,
      });
    }
    this.afterCommit(version);
    return version;
  }

  private afterCommit(version: number): void {
    if (version % this.opts.checkpointInterval === 0 && version > 0) {
      this.background('checkpoint', this.writeCheckpointOf(this.captureCheckpoint()));
    }
    this.maybeCompact();
  }

  /**
   * Starts an in-day compaction in the background when one is due and none runs; when it ends,
   * the next one due starts at once, so a backlog left by a busy writer is worked off.
   */
  private maybeCompact(): void {
    if (!this.opts.autoCompact || this.compacting || this.closed) return;
    if (Date.now() < this.compactHeldUntil) return;
    const inputs = this.pickAutoCompaction();
    if (!inputs) return;
    this.compacting = true;
    this.background(
      'compaction',
      this.serialCompaction(() =>
        this.compactGroups([inputs], 'OPTIMIZE', { auto: 'true' }, (g) => this.joinPlan(g)),
      )
        .catch((err: unknown) => {
          this.compactHeldUntil = Date.now() + COMPACT_RETRY_MS;
          throw err;
        })
        .finally(() => {
          this.compacting = false;
          this.maybeCompact();
        }),
    );
  }

  /** Runs the in-day compactions due now, one after another, until none is (tests, tools). */
  async compactDue(): Promise<void> {
    while (this.opts.autoCompact && !this.closed) {
      if (this.compacting) {
        await this.compactionLane;
        continue;
      }
      const inputs = this.pickAutoCompaction();
      if (!inputs) return;
      await this.track(
        this.serialCompaction(() =>
          this.compactGroups([inputs], 'OPTIMIZE', { auto: 'true' }, (g) => this.joinPlan(g)),
        ),
      );
    }
  }

  /**
   * The oldest files of the smallest size tier that make a group: `minFiles` files, or as few as
   * reach `smallFileRows` rows (two or more, as each is smaller). The second bound keeps each
   * compaction short when files are large: one of 64 files of 20,000 rows took 1 s on both cores
   * of a 2-core machine, and requests waited behind it.
   */
  private pickAutoCompaction(): AddFile[] | null {
    const ac = this.opts.autoCompact!;
    const full = (g: { files: AddFile[]; rows: number }) =>
      g.files.length >= ac.minFiles || g.rows >= ac.smallFileRows;
    const tiers = new Map<number, { files: AddFile[]; rows: number }>();
    for (const f of this.files) {
      if (f.stats === null || f.numRecords >= ac.smallFileRows) continue;
      const t = sizeTier(f.numRecords, ac.minFiles);
      let group = tiers.get(t);
      if (!group) {
        group = { files: [], rows: 0 };
        tiers.set(t, group);
      }
      if (full(group)) continue;
      group.files.push(f);
      group.rows += f.numRecords;
    }
    for (const t of [...tiers.keys()].sort((a, b) => a - b)) {
      const group = tiers.get(t)!;
      if (full(group)) return group.files;
    }
    return null;
  }

  private serialCompaction<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.compactionLane.then(fn, fn);
    this.compactionLane = run.catch(() => {});
    return run;
  }

  /**
   * How an in-day compaction may join `inputs` without a rewrite: the row group size from which
   * they may be copied (null when one file is too small for it); their row groups may be merged.
   */
  private joinPlan(inputs: readonly AddFile[]): JoinPlan {
    const from = this.opts.autoCompact?.copyRowGroupsFrom ?? DEFAULT_COPY_ROW_GROUPS_FROM;
    return {
      copyRowGroupsFrom: inputs.every((f) => f.numRecords >= from) ? from : null,
      mergeRowGroups: true,
    };
  }

  /**
   * Rewrites each group of files as one file; all groups in one OPTIMIZE commit. With a join
   * plan (in-day compaction, a seal that joins) the row groups may be copied or merged instead
   * (see CompactTask).
   */
  private async compactGroups(
    groups: AddFile[][],
    operation: string,
    params: Record<string, string>,
    planOf: (group: readonly AddFile[]) => JoinPlan = () => REWRITE,
  ): Promise<OptimizeResult> {
    const outputs = groups.map(() => `part-${randomUUID()}.zstd.parquet`);
    for (const o of outputs) this.inFlight.add(o);
    try {
      // Every group's task ends before a failure is thrown: one still writing when the catch below
      // deleted the outputs left its file behind, and each retry of a seal on a full disk another.
      const settled = await Promise.allSettled(
        groups.map((group, i) => {
          const task: CompactTask = {
            inputs: group.map((f) => this.absolute(f.path)),
            path: join(this.dir, outputs[i]!),
            zstdLevel: this.opts.zstdLevel,
            rowGroupSize: this.opts.rowGroupSize,
            fsync: this.opts.fsync,
            ...planOf(group),
          };
          return deltaPool().run<CompactedFile>('compact', task);
        }),
      );
      const failed = settled.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      const written = settled.map((r) => (r as PromiseFulfilledResult<CompactedFile>).value);
      const now = Date.now();
      const info = commitInfo(operation, params, this.opts.engineInfo, {
        operationMetrics: {
          numFilesRemoved: String(groups.reduce((n, g) => n + g.length, 0)),
          numFilesAdded: String(groups.length),
        },
      });
      const actions: Action[] = [];
      const addedFiles: AddFile[] = [];
      groups.forEach((group, i) => {
        const stats = mergeStats(
          this.schema,
          group.map((f) => f.stats!),
        );
        if (stats.numRecords !== written[i]!.rows) {
          throw new Error(`compaction wrote ${written[i]!.rows} rows, expected ${stats.numRecords}`);
        }
        for (const f of group) {
          actions.push({
            remove: {
              path: f.path,
              deletionTimestamp: now,
              dataChange: false,
              extendedFileMetadata: true,
              partitionValues: {},
              size: f.size,
            },
          });
        }
        const add: AddAction = {
          path: outputs[i]!,
          partitionValues: {},
          size: written[i]!.size,
          modificationTime: written[i]!.modificationTime,
          dataChange: false,
          stats: statsToJson(this.schema, stats),
        };
        actions.push({ add });
        addedFiles.push({
          path: add.path,
          size: add.size,
          modificationTime: add.modificationTime,
          dataChange: false,
          numRecords: stats.numRecords,
          stats,
        });
      });
      const inputs = groups.flat().map((f) => f.path);
      const version = await inLane(this.dir, () => this.commit(info, actions, inputs));
      for (const f of addedFiles) this.parsed.set(f.path, f);
      this.afterCompactionCommit(version);
      return { removed: inputs.length, added: groups.length, version };
    } catch (err) {
      await Promise.all(outputs.map((o) => unlink(join(this.dir, o)).catch(() => {})));
      throw err;
    } finally {
      for (const o of outputs) this.inFlight.delete(o);
    }
  }

  private afterCompactionCommit(version: number): void {
    if (version % this.opts.checkpointInterval === 0) {
      this.background('checkpoint', this.writeCheckpointOf(this.captureCheckpoint()));
    }
  }

  /**
   * OPTIMIZE: bin-packs files smaller than `targetFileRows` (default 1,000,000) into files of
   * about that many rows, in one commit of `dataChange:false` removes and adds. Null when there
   * is nothing to compact. Each group is rewritten through polars, which holds it whole in
   * memory (~890 bytes a span, ~190 MiB for 218,000, two groups at once on two cores); with
   * `join`, its row groups are merged page by page where the files allow it (this engine wrote
   * them), without decoding, for larger files (~13% on varied rows, 2.3x on repetitive ones).
   */
  optimize(opts: { targetFileRows?: number; join?: boolean } = {}): Promise<OptimizeResult | null> {
    this.assertWritable();
    const target = opts.targetFileRows ?? 1_000_000;
    return this.track(
      this.serialCompaction(async () => {
        await inLane(this.dir, () => this.catchUp());
        const groups: AddFile[][] = [];
        let current: AddFile[] = [];
        let rows = 0;
        for (const f of this.files) {
          if (f.stats === null || f.numRecords >= target) continue;
          if (current.length > 0 && rows + f.numRecords > target) {
            groups.push(current);
            current = [];
            rows = 0;
          }
          current.push(f);
          rows += f.numRecords;
        }
        groups.push(current);
        const work = groups.filter((g) => g.length > 1);
        if (work.length === 0) return null;
        const params = { targetSize: String(target), predicate: '[]' };
        return this.compactGroups(work, 'OPTIMIZE', params, opts.join ? () => MERGE : undefined);
      }),
    );
  }

  // -------------------------------------------------------------------------------------------
  // Checkpoints.

  private captureCheckpoint(): CapturedCheckpoint {
    const s = this.state;
    const retention = parseIntervalMs(
      s.metaData!.configuration['delta.deletedFileRetentionDuration'],
      DEFAULT_TOMBSTONE_RETENTION_MS,
    );
    const horizon = Date.now() - retention;
    const removes: RemoveAction[] = [];
    const expired: RemoveAction[] = [];
    for (const [path, r] of s.removes) {
      if ((r.deletionTimestamp ?? 0) > horizon) removes.push(r);
      else {
        // Expired: out of the checkpoints and out of memory, and its file deleted once the
        // checkpoint is written (no version kept since refers to it).
        s.removes.delete(path);
        expired.push(r);
      }
    }
    return {
      version: s.version,
      expired,
      content: {
        protocol: s.protocol!,
        metaData: s.metaData!,
        txns: [...s.txns.values()],
        adds: [...s.adds.values()],
        removes,
      },
    };
  }

  private writeCheckpointOf(cp: CapturedCheckpoint): Promise<void> {
    const run = async (): Promise<void> => {
      let written = false;
      try {
        written = await this.writeCheckpointFile(cp);
      } finally {
        if (!written) this.keepExpired(cp.expired);
      }
      if (!written) return;
      if (this.opts.logRetentionMs !== null) await this.cleanupLog({ retentionMs: this.opts.logRetentionMs });
      // The checkpoint is written: a file that cannot be deleted is a warning, not its failure.
      await this.deleteReplacedFiles(cp.expired.map((r) => r.path)).catch((err: Error) =>
        this.noteBackgroundError('deleting replaced files', err),
      );
    };
    const p = this.checkpointLane.then(run, run);
    this.checkpointLane = p.catch(() => {});
    return p;
  }

  /**
   * Removals a checkpoint let expire but that it did not write (it failed, or one of its version
   * was written before): back in memory, so that the next checkpoint expires them again and
   * deletes their files, which nothing else would (without a seal).
   */
  private keepExpired(expired: readonly RemoveAction[]): void {
    const s = this.state;
    for (const r of expired) if (!s.removes.has(r.path) && !s.adds.has(r.path)) s.removes.set(r.path, r);
  }

  /** Writes the checkpoint file, then _last_checkpoint; false if one of its version was written before. */
  private async writeCheckpointFile(cp: CapturedCheckpoint): Promise<boolean> {
    if (cp.version <= this.lastCheckpointed) return false;
    const path = join(this.logDir, checkpointFileName(cp.version));
    const task: CheckpointTask = {
      path,
      tempPath: join(this.logDir, `${TEMP_PREFIXES[1]}${randomUUID()}.parquet.tmp`),
      content: cp.content,
      fsync: this.opts.fsync,
    };
    const written = await deltaPool().run<{ sizeInBytes: number; actions: number }>('writeCheckpoint', task);
    // _last_checkpoint only after the checkpoint file, atomically, and never backwards.
    const current = await readLastCheckpointVersion(this.logStore);
    if (current === null || current < cp.version) {
      const tmp = join(this.logDir, `${TEMP_PREFIXES[2]}${randomUUID()}.tmp`);
      const body = JSON.stringify({
        version: cp.version,
        size: written.actions,
        sizeInBytes: written.sizeInBytes,
        numOfAddFiles: cp.content.adds.length,
      });
      try {
        await writeFileSynced(tmp, body, this.opts.fsync);
        await rename(tmp, join(this.logDir, LAST_CHECKPOINT));
      } catch (err) {
        await unlink(tmp).catch(() => {});
        throw err;
      }
    }
    this.lastCheckpointed = Math.max(this.lastCheckpointed, cp.version);
    return true;
  }

  /**
   * Deletes the data files whose removal expired (`delta.deletedFileRetentionDuration`): without
   * it a day's files replaced by in-day compaction stayed on disk until the seal's VACUUM, which
   * an instance that does not ship never runs (2.4 times the live data in a 35-minute soak, ~4
   * files a second per table). A file added again since (never, with unique names) stays.
   */
  private async deleteReplacedFiles(paths: readonly string[]): Promise<number> {
    let deleted = 0;
    const failed: string[] = [];
    for (const path of paths) {
      if (this.state.adds.has(path) || this.inFlight.has(decodeURIComponent(path))) continue;
      try {
        if (await unlinkIfExists(this.absolute(path))) deleted++;
      } catch (err) {
        failed.push(`${path} (${(err as Error).message})`);
      }
    }
    // After trying every file: one that cannot go does not keep the others (a seal's VACUUM
    // tries it again).
    if (failed.length > 0) throw new Error(`cannot delete replaced data files: ${failed.join(', ')}`);
    return deleted;
  }

  /**
   * Deletes the files of every removal the table holds, whatever its age: for a finished day,
   * which nothing writes again, once its writer is done with it (Logger), so that its last hour of
   * replaced files does not stay until a seal that an instance without shipping never runs. The
   * removals stay in the log; only reads of an older version needed the files. Callable after
   * close() (which waits for compactions). Returns how many files were deleted.
   */
  deleteRemovedFiles(): Promise<number> {
    return this.deleteReplacedFiles([...this.state.removes.values()].map((r) => r.path));
  }

  /** Writes a checkpoint of the current version (after the commits queued before this call). */
  async checkpoint(): Promise<void> {
    const cp = await inLane(this.dir, async () => this.captureCheckpoint());
    await this.track(this.writeCheckpointOf(cp));
  }

  /**
   * Replaces the checkpoints the snapshot skipped as unreadable (readers that start from them
   * fail): a new checkpoint of the current version, then the unreadable older ones deleted (one of
   * the same version is replaced). Returns how many there were.
   */
  async mendCheckpoints(): Promise<number> {
    const broken = this.state.unreadableCheckpoints;
    if (broken.length === 0) return 0;
    await this.checkpoint();
    for (const c of broken) {
      if (c.version >= this.lastCheckpointed) continue;
      await unlinkIfExists(join(this.logDir, checkpointFileName(c.version)));
    }
    this.state.unreadableCheckpoints = [];
    return broken.length;
  }

  /**
   * Deletes the commits and checkpoints before the newest checkpoint written at least
   * `retentionMs` ago (that checkpoint, its commit and everything after stay). Oldest first, so a
   * crash leaves a readable log. Readers of an older version reload from the checkpoint.
   */
  async cleanupLog(opts: { retentionMs: number }): Promise<{ deleted: number }> {
    if (!(opts.retentionMs >= 0)) throw new TypeError('retentionMs must be >= 0');
    const cutoff = Date.now() - opts.retentionMs;
    const { commits, checkpoints } = await listLog(this.logDir);
    let keep: number | null = null;
    for (const cp of checkpoints) {
      if (cp > this.state.version) continue;
      const st = await stat(join(this.logDir, checkpointFileName(cp))).catch(() => null);
      if (st && st.mtimeMs <= cutoff) {
        keep = cp;
        break;
      }
    }
    if (keep === null) return { deleted: 0 };
    const doomed: { version: number; name: string }[] = [];
    for (const v of commits) if (v < keep) doomed.push({ version: v, name: commitFileName(v) });
    for (const v of checkpoints) if (v < keep) doomed.push({ version: v, name: checkpointFileName(v) });
    doomed.sort((a, b) => a.version - b.version);
    let deleted = 0;
    for (const d of doomed) if (await unlinkIfExists(join(this.logDir, d.name))) deleted++;
    return { deleted };
  }

  // -------------------------------------------------------------------------------------------
  // VACUUM.

  /**
   * Deletes data files no live add refers to: removed files whose deletion is older than
   * `retentionMs`, and unreferenced files (e.g. left by a killed write) modified before then.
   * Also deletes stale temporary files of this engine in `_delta_log`.
   */
  async vacuum(opts: { retentionMs: number }): Promise<{ deleted: number }> {
    this.assertWritable();
    if (!(opts.retentionMs >= 0)) throw new TypeError('retentionMs must be >= 0');
    await inLane(this.dir, () => this.catchUp());
    const cutoff = Date.now() - opts.retentionMs;
    const candidates: { rel: string; abs: string }[] = [];
    const walk = async (rel: string): Promise<void> => {
      const entries = await readdir(join(this.dir, rel), { withFileTypes: true });
      for (const e of entries) {
        if (e.name.startsWith('_') || e.name.startsWith('.')) continue;
        const childRel = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) await walk(childRel);
        else if (e.isFile()) candidates.push({ rel: childRel, abs: join(this.dir, childRel) });
      }
    };
    await walk('');
    const live = new Set<string>();
    for (const p of this.state.adds.keys()) live.add(decodeURIComponent(p));
    const tombstones = new Map<string, number>();
    for (const r of this.state.removes.values())
      tombstones.set(decodeURIComponent(r.path), r.deletionTimestamp ?? 0);
    const doomed: string[] = [];
    for (const c of candidates) {
      if (live.has(c.rel) || this.inFlight.has(c.rel)) continue;
      const removedAt = tombstones.get(c.rel);
      if (removedAt !== undefined) {
        if (removedAt <= cutoff) doomed.push(c.abs);
        continue;
      }
      const st = await stat(c.abs).catch(() => null);
      if (st && st.mtimeMs <= cutoff) doomed.push(c.abs);
    }
    let deleted = 0;
    if (doomed.length > 0) {
      const params = { retentionCheckEnabled: 'false', specifiedRetentionMillis: String(opts.retentionMs) };
      await inLane(this.dir, () =>
        this.commit(
          commitInfo('VACUUM START', params, this.opts.engineInfo, {
            operationMetrics: { numFilesToDelete: String(doomed.length) },
          }),
          [],
        ),
      );
      for (const abs of doomed) {
        // Re-checked at deletion time: a file committed since the listing stays.
        const rel = abs
          .slice(this.dir.length + 1)
          .split('\\')
          .join('/');
        if (this.state.adds.has(rel) || this.inFlight.has(rel)) continue;
        if (await unlinkIfExists(abs)) deleted++;
      }
      await inLane(this.dir, () =>
        this.commit(
          commitInfo('VACUUM END', { status: 'COMPLETED' }, this.opts.engineInfo, {
            operationMetrics: { numDeletedFiles: String(deleted) },
          }),
          [],
        ),
      );
    }
    await this.removeStaleTempFiles(Math.min(cutoff, Date.now() - 60_000));
    return { deleted };
  }

  private async removeStaleTempFiles(cutoff: number): Promise<void> {
    const names = await readdir(this.logDir);
    for (const n of names) {
      if (!TEMP_PREFIXES.some((p) => n.startsWith(p)) || !n.endsWith('.tmp')) continue;
      const st = await stat(join(this.logDir, n)).catch(() => null);
      if (st && st.mtimeMs < cutoff) await unlink(join(this.logDir, n)).catch(() => {});
    }
  }

  /** Waits for queued writes, background checkpoints and compactions; further writes fail. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}
