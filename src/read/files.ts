// Which days and which Parquet files a query reads: day folders present under staging/days and
// days recorded in index/days.jsonl, the storage each day is read from (a day verified in object
// storage is read from there), and the live files of each day's table with the event_ts bounds
// from their Delta statistics, from the local log or the shipped one.

import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { commitFileName, LOG_DIR } from '../delta/actions.ts';
import { dataFileProblems } from '../delta/check.ts';
import { compareCodePoints, type FileStats } from '../delta/stats.ts';
import { type AddFile, DeltaLogError, DeltaTable, listLog, readSnapshot } from '../delta/table.ts';
import type { TableName } from '../schema/tables.ts';
import { readDayStates } from '../storage/days-index.ts';
import type { InstanceLayout } from '../storage/layout.ts';
import { isDay } from '../storage/layout.ts';
import { ObjectStore } from '../storage/object-store.ts';
import { describeMissingS3, type ResolvedS3, resolveS3, type S3Settings } from '../storage/s3-config.ts';
import type { NormalizedQuery, RowFilter } from './filters.ts';

/** One live Parquet file of a table. */
export interface FileEntry {
  path: string;
  /**
   * Arrival rank among the files of a query: older days first, then the order of the table's log
   * (resolveFiles numbers them). Ties of event time are broken by it, then by the row's position.
   */
  arrival: number;
  /** Bytes of the Parquet file. */
  size: number;
  numRecords: number | null;
  /** A lower bound of the file's smallest event_ts (microseconds), null when unknown. */
  minTs: bigint | null;
  /** An upper bound of the file's largest event_ts (microseconds), null when unknown. */
  maxTs: bigint | null;
}

/**
 * Refused because object storage is not configured or not readable yet. A TypeError, like every
 * query the read model refuses, so that callers (HTTP: 400) treat it as a bad request.
 */
export class StorageUnavailableError extends TypeError {
  /** The object-storage settings whose variables are missing (empty when the reason is another). */
  readonly missing: readonly string[];
  constructor(message: string, missing: readonly string[] = []) {
    super(message);
    this.name = 'StorageUnavailableError';
    this.missing = missing;
  }
}

/**
 * A day's table cannot be read: its Delta log or one of its data files is damaged. Reads of other
 * tables and days are not affected.
 */
export class DamagedTableError extends Error {
  readonly table: TableName;
  readonly day: string;
  /** What is damaged. */
  readonly reason: string;
  /** The damaged data file (its path in the Delta log), when the damage is one file's. */
  readonly file: string | undefined;
  constructor(table: TableName, day: string, reason: string, file?: string) {
    super(
      `the ${table} table of ${day} is damaged: ${reason}. Other days read normally (narrow the date ` +
        'range to leave it out); `otelake check` says how to repair it',
    );
    this.name = 'DamagedTableError';
    this.table = table;
    this.day = day;
    this.reason = reason;
    this.file = file;
  }
}

/** Phases after which a day is read from object storage by `auto`. */
const REMOTE_PHASES = new Set(['verified', 'cleaned']);

/** The UTC days with a folder under staging/days (unsorted). */
export async function listLocalDays(layout: InstanceLayout): Promise<string[]> {
  try {
    return (await readdir(layout.daysDir)).filter(isDay);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** A table of one day to read, and from where. */
export interface DaySource {
  day: string;
  storage: 'local' | 's3';
  /** Local table folder, or the table's key in object storage (ending in '/'). */
  dir: string;
}

/**
 * Rows are filed under their arrival day, and a row arrives after its event time, except when the
 * sender's clock is ahead: rows of an event-time window starting at `since` sit in the day of
 * `since` or any later day, or in the day before it for a row stamped up to a day ahead of its
 * arrival. Later days are always opened (a late row can arrive any time after its event); their
 * files are then pruned by their event_ts statistics.
 */
export const EARLY_ARRIVAL_DAYS = 1;

/** The first arrival day that can hold rows at or after `sinceUs`. */
export function firstDayOfWindow(sinceUs: bigint): string {
  const ms = Number(sinceUs / 1000n) - EARLY_ARRIVAL_DAYS * 86_400_000;
  return new Date(Math.max(ms, 0)).toISOString().slice(0, 10);
}

function inRange(day: string, q: NormalizedQuery): boolean {
  if (q.sinceUs !== null && day < firstDayOfWindow(q.sinceUs)) return false;
  return (q.dateFrom === null || day >= q.dateFrom) && (q.dateTo === null || day <= q.dateTo);
}

/** The object-storage settings, or a refusal naming what is missing. */
function requireS3(s3: ResolvedS3, what: string): S3Settings {
  if (s3.settings) return s3.settings;
  const why = s3.invalid ?? `missing: ${describeMissingS3(s3.missing)}`;
  throw new StorageUnavailableError(`${what} needs the object-storage configuration; ${why}`, s3.missing);
}

/** One client per settings object (the Logger's lives as long as the Logger). */
const stores = new WeakMap<S3Settings, ObjectStore>();
export function objectStoreFor(settings: S3Settings): ObjectStore {
  let store = stores.get(settings);
  if (!store) {
    store = new ObjectStore(settings);
    stores.set(settings, store);
  }
  return store;
}

/**
 * The days of the query's range holding the table, oldest first. Only days present are listed
 * (omitted bounds mean the earliest and the latest day present), so a missing instance reads empty.
 * `local` reads local tables only; `s3` the days found in object storage; `auto` a day verified in
 * object storage from there, any other day locally. `s3` defaults to the environment's settings.
 */
export async function resolveDays(
  layout: InstanceLayout,
  q: NormalizedQuery,
  s3: ResolvedS3 = resolveS3(),
): Promise<DaySource[]> {
  if (q.storage === 's3') {
    const settings = requireS3(s3, "storage 's3'");
    const remoteDays = await objectStoreFor(settings).folders(settings.daysKey(layout.instanceId));
    return remoteDays
      .filter((d) => isDay(d) && inRange(d, q))
      .sort()
      .map((day) => ({ day, storage: 's3', dir: `${settings.dayKey(layout.instanceId, day)}${q.table}/` }));
  }
  const local = new Set((await listLocalDays(layout)).filter((d) => inRange(d, q)));
  const states = await readDayStates(layout.daysIndex);
  const recorded = [...states.keys()].filter((d) => isDay(d) && inRange(d, q));
  const days = [...new Set([...local, ...recorded])].sort();
  const out: DaySource[] = [];
  for (const day of days) {
    const dir = layout.tableDir(day, q.table);
    const localCopy = local.has(day) && (await isDirectory(dir));
    const shipped = REMOTE_PHASES.has(states.get(day)?.phase ?? '');
    if (q.storage === 'auto' && shipped && (s3.settings !== null || !localCopy)) {
      const settings = requireS3(
        s3,
        `day ${day} is read from object storage (phase ${states.get(day)!.phase})`,
      );
      out.push({ day, storage: 's3', dir: `${settings.dayKey(layout.instanceId, day)}${q.table}/` });
    } else if (localCopy) {
      out.push({ day, storage: 'local', dir });
    }
  }
  return out;
}

/** Could a file with these statistics hold a row of the window [sinceUs, untilUs)? Unknown = yes. */
export function mayOverlap(stats: FileStats | null, sinceUs: bigint | null, untilUs: bigint | null): boolean {
  if (stats === null) return true;
  const min = stats.minValues['event_ts'];
  const max = stats.maxValues['event_ts'];
  if (sinceUs !== null && typeof max === 'bigint' && max < sinceUs) return false;
  if (untilUs !== null && typeof min === 'bigint' && min >= untilUs) return false;
  return true;
}

/** Could a file with these statistics hold a row passing every filter? Unknown = yes. */
export function mayMatch(stats: FileStats | null, filters: readonly RowFilter[]): boolean {
  if (stats === null) return true;
  for (const f of filters) {
    const nulls = stats.nullCount[f.column];
    if (nulls !== undefined && nulls === stats.numRecords) return false; // all null: no filter passes
    const min = stats.minValues[f.column];
    const max = stats.maxValues[f.column];
    if (f.op === 'ge' && typeof f.value === 'number' && typeof max === 'number' && max < f.value)
      return false;
    if (f.op === 'eq' && typeof f.value === 'string') {
      if (typeof min === 'string' && compareCodePoints(f.value, min) < 0) return false;
      if (typeof max === 'string' && compareCodePoints(f.value, max) > 0) return false;
    }
  }
  return true;
}

function boundOf(v: unknown): bigint | null {
  return typeof v === 'bigint' ? v : null;
}

/** A table's live files with their statistics, as of one listing of its `_delta_log`. */
export interface Snapshot {
  logListing: string;
  /** The table version the files are live at. */
  version: number;
  files: { path: string; size: number; numRecords: number; stats: FileStats | null }[];
}

/**
 * Snapshots by table folder (or a shipped table's URI). A past day's log never changes: its table
 * is not reloaded.
 */
const snapshots = new Map<string, Snapshot>();
const MAX_SNAPSHOTS = 256;

/**
 * The commit and checkpoint files of a log, and the identity of its newest commit file (a table
 * recreated in the same folder repeats the names), as a key; null when there is no committed table.
 */
async function logListing(dir: string): Promise<string | null> {
  const logDir = join(dir, LOG_DIR);
  // Any unreadable log reads as no table, not only a missing one.
  const log = await listLog(logDir).catch(() => null);
  if (log === null || (log.commits.length === 0 && log.checkpoints.length === 0)) return null;
  const newest = log.commits.at(-1);
  const identity =
    newest === undefined
      ? ''
      : await stat(join(logDir, commitFileName(newest))).then(
          (s) => `${s.ino}:${s.mtimeMs}`,
          () => '',
        );
  return `${log.commits}/${log.checkpoints}/${log.lastCheckpoint}/${identity}`;
}

/**
 * The table's live files, from its Delta log: reloaded whenever the log changed since the last
 * query (a commit adds a file to it), so a reader sees every commit of a concurrent writer and
 * never waits for a writer of this process.
 */
export async function snapshotOf(dir: string): Promise<Snapshot | null> {
  const listing = await logListing(dir);
  if (listing === null) return null;
  return remembered(dir, listing, async () => {
    const table = await DeltaTable.open(dir);
    const paths = table.liveFilePaths();
    return { version: table.version, files: liveFiles(table.files, (_, i) => paths[i]!) };
  });
}

/** The snapshot cached under `key` if its log listing is still `listing`, else a new one loaded. */
async function remembered(
  key: string,
  listing: string,
  load: () => Promise<Omit<Snapshot, 'logListing'>>,
): Promise<Snapshot> {
  const cached = snapshots.get(key);
  const snapshot = cached?.logListing === listing ? cached : { logListing: listing, ...(await load()) };
  snapshots.delete(key); // most recently used last
  snapshots.set(key, snapshot);
  if (snapshots.size > MAX_SNAPSHOTS) snapshots.delete(snapshots.keys().next().value!);
  return snapshot;
}

/** A log's live files as a snapshot lists them, each at the path `pathOf` gives. */
function liveFiles(files: readonly AddFile[], pathOf: (f: AddFile, i: number) => string): Snapshot['files'] {
  return files.map((f, i) => ({
    path: pathOf(f, i),
    size: f.size,
    numRecords: f.numRecords,
    stats: f.stats,
  }));
}

/** What of a query rules files out by their statistics. */
type FileBounds = Pick<NormalizedQuery, 'filters' | 'sinceUs' | 'untilUs'>;

/**
 * Live files of a day's table, in the order of its log, minus those whose statistics rule out
 * the query (its filters and event-time window). A folder without a committed table (not created
 * yet) has none. `arrival` is numbered by resolveFiles.
 */
export async function listTableFiles(
  dir: string,
  q: FileBounds = { filters: [], sinceUs: null, untilUs: null },
  versions?: Map<string, number>,
): Promise<FileEntry[]> {
  const snapshot = await snapshotOf(dir);
  versions?.set(dir, snapshot?.version ?? -1);
  return snapshot === null ? [] : entriesOf(snapshot, q);
}

/** A snapshot's live files, in log order, minus those whose statistics rule out the query. */
function entriesOf(snapshot: Snapshot, q: FileBounds): FileEntry[] {
  const out: FileEntry[] = [];
  for (const f of snapshot.files) {
    if (!mayMatch(f.stats, q.filters) || !mayOverlap(f.stats, q.sinceUs, q.untilUs)) continue;
    out.push({
      path: f.path,
      arrival: 0,
      size: f.size,
      numRecords: f.numRecords >= 0 ? f.numRecords : null,
      minTs: boundOf(f.stats?.minValues['event_ts']),
      maxTs: boundOf(f.stats?.maxValues['event_ts']),
    });
  }
  return out;
}

/**
 * Live files of a shipped table (its key in object storage, files as s3:// URIs), like
 * listTableFiles: its log is listed per query, its snapshot cached under its URI.
 * `versions` receives its version under its key.
 */
async function listRemoteTableFiles(
  store: ObjectStore,
  key: string,
  q: FileBounds,
  versions?: Map<string, number>,
): Promise<FileEntry[]> {
  const log = store.logStore(key);
  const listing = (await log.names()).sort().join('/');
  if (listing === '') {
    versions?.set(key, -1);
    return [];
  }
  const snapshot = await remembered(store.settings.uri(key), listing, async () => {
    const s = await readSnapshot(log);
    return {
      version: s.version,
      files: liveFiles(s.files, (f) => store.settings.uri(`${key}${decodeURIComponent(f.path)}`)),
    };
  });
  versions?.set(key, snapshot.version);
  return entriesOf(snapshot, q);
}

export interface ResolveOptions {
  /** Object-storage settings for shipped days; default: the environment's. */
  s3?: ResolvedS3;
  /** Receives the version of each table as read (-1: no table yet), by folder or object key. */
  versions?: Map<string, number>;
}

/**
 * Every live file the query may need, over all days of its range (local paths or s3:// URIs),
 * numbered in arrival order.
 */
export async function resolveFiles(
  layout: InstanceLayout,
  q: NormalizedQuery,
  opts: ResolveOptions = {},
): Promise<FileEntry[]> {
  const s3 = opts.s3 ?? resolveS3();
  const days = await resolveDays(layout, q, s3);
  const perDay = await Promise.all(
    days.map((d) =>
      d.storage === 'local'
        ? listTableFiles(d.dir, q, opts.versions).catch((err: unknown) => {
            throw err instanceof DeltaLogError ? new DamagedTableError(q.table, d.day, err.message) : err;
          })
        : listRemoteTableFiles(objectStoreFor(s3.settings!), d.dir, q, opts.versions),
    ),
  );
  const files = perDay.flat();
  files.forEach((f, i) => {
    f.arrival = i;
  });
  return files;
}

/**
 * After a scan failed: the first damaged data file of the query's local tables (missing, of another
 * size than logged, unreadable footer, another row count), as a DamagedTableError; null when all
 * are sound. Shipped days were verified when they were shipped; `otelake check` checks local ones.
 */
export async function findDamagedFile(
  layout: InstanceLayout,
  q: NormalizedQuery,
  s3: ResolvedS3 = resolveS3(),
): Promise<DamagedTableError | null> {
  for (const d of await resolveDays(layout, q, s3)) {
    if (d.storage !== 'local') continue;
    // A writer may commit (compact, vacuum) while the files are checked: a problem counts only
    // when the table is still at the version checked.
    for (let tries = 0; tries < 3; tries++) {
      const table = await DeltaTable.open(d.dir);
      const problem = (await dataFileProblems(table)).entries().next().value;
      if (problem === undefined) break;
      if ((await DeltaTable.open(d.dir)).version === table.version)
        return new DamagedTableError(q.table, d.day, problem[1], problem[0]);
    }
  }
  return null;
}

/**
 * Without row filters, the newest maxRows rows lie in the newest files holding maxRows rows and in
 * any file overlapping them in time: the other files are dropped. Files with unknown bounds stay.
 */
export function pruneForNewest(files: readonly FileEntry[], maxRows: number): FileEntry[] {
  const known = files.filter((f) => f.maxTs !== null && f.minTs !== null && f.numRecords !== null);
  known.sort((a, b) => (a.maxTs! > b.maxTs! ? -1 : a.maxTs! < b.maxTs! ? 1 : 0));
  let rows = 0;
  let threshold: bigint | null = null;
  for (const f of known) {
    rows += f.numRecords!;
    threshold = threshold === null || f.minTs! < threshold ? f.minTs! : threshold;
    if (rows >= maxRows) break;
  }
  if (rows < maxRows || threshold === null) return [...files];
  const floor = threshold;
  return files.filter((f) => f.maxTs === null || f.maxTs >= floor);
}
