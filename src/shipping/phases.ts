// The four steps that move a finished day from local disk to object storage: seal (OPTIMIZE,
// VACUUM with zero retention, checkpoint, log cleanup; counts and versions), upload (data files
// first, each table's _delta_log last, files already there with the same size skipped), verify
// (the remote tables opened from object storage and read: counts and versions equal the seal's)
// and clean (the local copy removed). Each is safe to run again after a crash at any point.

import { readdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { LAST_CHECKPOINT, LOG_DIR, parseCheckpointVersion, parseCommitVersion } from '../delta/actions.ts';
import { type DeltaOptions, DeltaTable, localLogStore, readSnapshot } from '../delta/table.ts';
import { countRows } from '../read/query.ts';
import { SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';
import type { TablePhaseStats } from '../storage/days-index.ts';
import type { InstanceLayout } from '../storage/layout.ts';
import type { ObjectStore } from '../storage/object-store.ts';

/**
 * Rows per data file after the seal's OPTIMIZE: two row groups of 131,072. The newest-rows queries
 * read the newest file whole: with 1,000,000-row files "newest 100 errors containing X" on a
 * 5,000,000-row day took 248 ms locally against 106 ms on the 250,000-row files before the seal
 * (bench/ship-day.ts), and fetched 20% of the table from S3.
 */
export const SEAL_FILE_ROWS = 262_144;
/**
 * The least memory (a container's limit, else the machine's) with which the seal's OPTIMIZE
 * rewrites its files through polars. A rewrite holds its group of ~262,000 rows whole (~890 bytes
 * a span: +185-276 MiB each, two at once on two cores, beside the server's own 150-200 MiB under
 * ingest), and a server sealing a day of 2,000,000 spans and log records peaked at 547 MiB; in a
 * 256 or 384 MiB cgroup the kernel killed it, and at every restart again. With less, the seal
 * merges the files' row groups page by page instead (a few MiB; sealed in a 256 MiB cgroup at 196
 * MiB), for larger files.
 */
export const SEAL_REWRITE_MIN_MEMORY = 1024 * 1024 * 1024;

/** Whether the seal joins its files rather than rewriting them, with `memory` bytes to plan for. */
export function sealJoins(memory: number): boolean {
  return memory < SEAL_REWRITE_MIN_MEMORY;
}

/** Files uploaded at once (a large one is itself sent in several parts at once). */
const UPLOAD_CONCURRENCY = 4;

export type DayTables = Record<TableName, TablePhaseStats>;

/** One local file of a day to upload: its key relative to the day's folder. */
interface LocalFile {
  rel: string;
  path: string;
  size: number;
}

/**
 * The files of a sealed table in upload order: live data files, then the log (checkpoints,
 * commits oldest first, `_last_checkpoint` last), so a reader never sees a commit before its files.
 */
async function tableFiles(
  layout: InstanceLayout,
  day: string,
  table: TableName,
): Promise<{ data: LocalFile[]; log: LocalFile[] }> {
  const dir = layout.tableDir(day, table);
  const snapshot = await readSnapshot(localLogStore(join(dir, LOG_DIR)));
  const data = snapshot.files.map((f) => {
    const name = decodeURIComponent(f.path);
    return { rel: `${table}/${name}`, path: join(dir, name), size: f.size };
  });
  const rank = (n: string): number => {
    if (n === LAST_CHECKPOINT) return Number.MAX_SAFE_INTEGER;
    const cp = parseCheckpointVersion(n);
    if (cp !== null) return cp * 2;
    return (parseCommitVersion(n) ?? -1) * 2 + 1;
  };
  const names = (await readdir(join(dir, LOG_DIR)))
    .filter((n) => rank(n) >= 0)
    .sort((a, b) => rank(a) - rank(b));
  const log: LocalFile[] = [];
  for (const n of names) {
    const path = join(dir, LOG_DIR, n);
    log.push({ rel: `${table}/${LOG_DIR}/${n}`, path, size: (await stat(path)).size });
  }
  return { data, log };
}

/**
 * Seals the day's six tables (a table the day never got is created empty, so that the remote day
 * is complete): OPTIMIZE into files of about SEAL_FILE_ROWS rows, VACUUM with zero retention
 * (nothing else writes a finished day), a checkpoint, and the log before it removed.
 */
export async function sealDay(
  layout: InstanceLayout,
  day: string,
  opts: DeltaOptions,
  seal: { join: boolean } = { join: false },
): Promise<DayTables> {
  const out = {} as DayTables;
  for (const table of TABLE_NAMES) {
    const dt = await DeltaTable.createOrOpen(layout.tableDir(day, table), SCHEMAS[table], {
      ...opts,
      autoCompact: null,
      logRetentionMs: null,
    });
    try {
      await dt.optimize({ targetFileRows: SEAL_FILE_ROWS, join: seal.join });
      await dt.vacuum({ retentionMs: 0 });
      await dt.checkpoint();
      await dt.cleanupLog({ retentionMs: 0 });
      const rows = dt.rowCount();
      const { data, log } = await tableFiles(layout, day, table);
      const files = [...data, ...log];
      out[table] = {
        rows,
        version: dt.version,
        bytes: files.reduce((n, f) => n + f.size, 0),
        files: files.length,
      };
    } finally {
      await dt.close();
    }
  }
  return out;
}

export interface UploadProgress {
  bytesDone: number;
  bytesTotal: number;
  filesDone: number;
  filesTotal: number;
}

/** Runs `fn` over `items`, at most `limit` at once; the first failure stops new work and is thrown. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/**
 * Uploads the sealed day: every table's data files first, then every table's log. A file already
 * present remotely with the same size is skipped, so an interrupted upload resumes where it was.
 * Returns what was sent.
 */
export async function uploadDay(
  store: ObjectStore,
  layout: InstanceLayout,
  day: string,
  onProgress: (p: UploadProgress) => void = () => {},
  signal?: AbortSignal,
): Promise<{ files: number; bytes: number }> {
  const dayKey = store.settings.dayKey(layout.instanceId, day);
  const remote = await store.list(dayKey, signal);
  const data: LocalFile[] = [];
  const log: LocalFile[] = [];
  for (const table of TABLE_NAMES) {
    const t = await tableFiles(layout, day, table);
    data.push(...t.data);
    log.push(...t.log);
  }
  const missing = (f: LocalFile) => remote.get(f.rel) !== f.size;
  const todoData = data.filter(missing);
  const todoLog = log.filter(missing);
  const progress: UploadProgress = {
    bytesDone: 0,
    bytesTotal: [...todoData, ...todoLog].reduce((n, f) => n + f.size, 0),
    filesDone: 0,
    filesTotal: todoData.length + todoLog.length,
  };
  onProgress({ ...progress });
  const send = async (f: LocalFile) => {
    await store.upload(
      `${dayKey}${f.rel}`,
      f.path,
      f.size,
      (n) => {
        progress.bytesDone += n;
        onProgress({ ...progress });
      },
      signal,
    );
    progress.filesDone++;
    onProgress({ ...progress });
  };
  await eachLimited(todoData, UPLOAD_CONCURRENCY, send);
  // The logs one by one, in order: a commit never lands before the checkpoint or commit it follows.
  for (const f of todoLog) await send(f);
  return { files: progress.filesTotal, bytes: progress.bytesTotal };
}

/** The remote copy differs from the sealed one: it must be uploaded again, never cleaned. */
export class VerifyMismatchError extends Error {
  override name = 'VerifyMismatchError';
}

/**
 * Opens each remote table from object storage and checks it against the seal: the same version,
 * every live file present with its size, the row count of the log's statistics, and the rows read
 * from the remote files by otelake's reader (polars over object storage).
 */
export async function verifyDay(
  store: ObjectStore,
  layout: InstanceLayout,
  day: string,
  sealed: Record<string, TablePhaseStats>,
  signal?: AbortSignal,
): Promise<DayTables> {
  const dayKey = store.settings.dayKey(layout.instanceId, day);
  const remote = await store.list(dayKey, signal);
  const problems: string[] = [];
  const out = {} as DayTables;
  for (const table of TABLE_NAMES) {
    const expected = sealed[table];
    if (!expected) {
      problems.push(`${table}: no counts recorded by the seal`);
      continue;
    }
    const tableKey = `${dayKey}${table}/`;
    let snapshot: Awaited<ReturnType<typeof readSnapshot>>;
    try {
      snapshot = await readSnapshot(store.logStore(tableKey));
    } catch (err) {
      problems.push(`${table}: the remote table cannot be opened (${(err as Error).message})`);
      continue;
    }
    if (snapshot.version !== expected.version)
      problems.push(`${table}: remote version ${snapshot.version}, sealed ${expected.version}`);
    const absent = snapshot.files.filter(
      (f) => remote.get(`${table}/${decodeURIComponent(f.path)}`) !== f.size,
    );
    if (absent.length > 0) {
      problems.push(
        `${table}: ${absent.length} data file(s) missing or of another size remotely (${absent
          .slice(0, 3)
          .map((f) => f.path)
          .join(', ')})`,
      );
      continue;
    }
    const logRows = snapshot.files.reduce((n, f) => n + Math.max(0, f.numRecords), 0);
    const uris = snapshot.files.map((f) => store.settings.uri(`${tableKey}${decodeURIComponent(f.path)}`));
    const readRows =
      uris.length === 0 ? 0 : await countRows(table, uris, store.settings.polarsCloudOptions());
    if (logRows !== expected.rows || readRows !== expected.rows)
      problems.push(`${table}: remote rows ${readRows} (log statistics ${logRows}), sealed ${expected.rows}`);
    out[table] = { ...expected, rows: readRows, version: snapshot.version };
  }
  if (problems.length > 0) throw new VerifyMismatchError(`the remote copy differs: ${problems.join('; ')}`);
  return out;
}

/**
 * Deletes the files in-day compaction replaced in a finished day's tables that no seal will VACUUM
 * (no automatic shipping), for a day whose tables did not close in a running process after its
 * end (which deletes them, see Logger). A table not there, or not readable, is left to the writer
 * and `otelake check`, which report it. Returns how many files were deleted.
 */
export async function tidyDay(layout: InstanceLayout, day: string, opts: DeltaOptions): Promise<number> {
  let deleted = 0;
  for (const table of TABLE_NAMES) {
    const dt = await DeltaTable.open(layout.tableDir(day, table), opts).catch(() => null);
    if (dt === null) continue;
    await dt.close(); // nothing is written through it
    deleted += await dt.deleteRemovedFiles();
  }
  return deleted;
}

/** Removes the day's local copy (after `verified` only). */
export async function cleanDay(layout: InstanceLayout, day: string): Promise<void> {
  await rm(dirname(layout.dayDir(day)), { recursive: true, force: true });
}
