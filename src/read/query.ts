// The read API shared by the library, the HTTP /api endpoints and the CLI viewer. A query lists
// the live files of its days, then runs in a query worker (polars, synchronous API) that returns
// an Arrow IPC buffer; rows are built from it in the main thread without stalling the loop.

import { availableParallelism } from 'node:os';
import type { LazyDataFrame } from 'nodejs-polars';
import type { Row, TableName } from '../schema/tables.ts';
import type { InstanceLayout } from '../storage/layout.ts';
import { siblingModule, WorkerPool } from '../storage/worker-pool.ts';
import { rowsFromIpc } from './arrow-rows.ts';
import { type FileEntry, findDamagedFile, pruneForNewest, resolveFiles } from './files.ts';
import { type NormalizedQuery, normalizeQuery, type ReadQuery } from './filters.ts';
import type { QueryResult, QueryTask } from './query-worker.ts';

export type { FileEntry } from './files.ts';
export { DamagedTableError, StorageUnavailableError } from './files.ts';
export type { NormalizedQuery, ReadQuery, RowFilter, Storage } from './filters.ts';
export { filtersOf, normalizeQuery, STORAGES, validateQuery } from './filters.ts';
export { isoFromMicros, type JsonValue, rowToJson } from './json.ts';

export interface ReadOptions {
  /** 'objects' (default): plain rows; 'lazy': a polars LazyDataFrame the caller collects. */
  returnAs?: 'objects' | 'lazy';
}

/** Query workers are replaced after this many queries: native memory of polars stays bounded. */
const RECYCLE_AFTER = 32;

let pool: WorkerPool | null = null;

function queryPool(): WorkerPool {
  pool ??= new WorkerPool(siblingModule(import.meta.url, 'query-worker'), {
    size: Math.max(1, Math.min(2, availableParallelism())),
    recycleAfter: RECYCLE_AFTER,
  });
  return pool;
}

/** Stops the query workers (a later query starts new ones). */
export async function closeReadWorkers(): Promise<void> {
  const p = pool;
  pool = null;
  if (p) await p.close();
}

/**
 * Listings tried when files vanish under a query (a writer compacting and vacuuming), with a
 * short pause growing between them so a reader is not starved by a busy writer.
 */
export const MAX_ATTEMPTS = 8;

/** A file listed as live was removed (vacuumed, compacted, day cleaned) before it was scanned. */
function isVanishedFile(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err);
  return /No such file or directory|os error 2\b|ENOENT|not found|missing commit/i.test(message);
}

/** Test seams: a step between listing the files and scanning them; the first-round size. */
export const readHooks: {
  afterListing?: (files: readonly FileEntry[]) => Promise<void>;
  firstRoundRows?: number;
} = {};

async function runInWorker(q: NormalizedQuery, files: FileEntry[]): Promise<Row[]> {
  await readHooks.afterListing?.(files);
  const task: QueryTask = { query: q, files, firstRoundRows: readHooks.firstRoundRows };
  const result = await queryPool().run<QueryResult>('query', task);
  return rowsFromIpc(result.ipc);
}

/**
 * Reads rows of a table, newest first by event_ts. Every query re-reads the listing of each
 * table's Delta log (a table is reloaded when its log changed), so a reader sees what a concurrent
 * writer committed; a file vacuumed between listing and scanning makes the query list again and
 * retry (up to MAX_ATTEMPTS listings). `dateFrom`/`dateTo` select the day folders (UTC day of
 * arrival), not event_ts. The lazy frame is built in the calling thread; collect it with
 * `collectSync` in a worker if a native panic must not abort the process.
 */
export async function readTable(
  layout: InstanceLayout,
  table: TableName,
  query: ReadQuery,
  opts: ReadOptions & { returnAs: 'lazy' },
): Promise<LazyDataFrame>;
export async function readTable(
  layout: InstanceLayout,
  table: TableName,
  query?: ReadQuery,
  opts?: ReadOptions & { returnAs?: 'objects' },
): Promise<Row[]>;
export async function readTable(
  layout: InstanceLayout,
  table: TableName,
  query?: ReadQuery,
  opts?: ReadOptions,
): Promise<Row[] | LazyDataFrame>;
export async function readTable(
  layout: InstanceLayout,
  table: TableName,
  query: ReadQuery = {},
  opts: ReadOptions = {},
): Promise<Row[] | LazyDataFrame> {
  const returnAs = opts.returnAs ?? 'objects';
  if (returnAs !== 'objects' && returnAs !== 'lazy')
    throw new TypeError(`invalid returnAs ${JSON.stringify(returnAs)}: one of objects, lazy`);
  const q = normalizeQuery(table, query);

  if (returnAs === 'lazy') {
    let files = await resolveFiles(layout, q);
    if (q.maxRows !== null && q.filters.length === 0) files = pruneForNewest(files, q.maxRows);
    const { buildLazy } = await import('./scan.ts');
    return buildLazy(q, files);
  }

  // A file vacuumed or compacted away between listing and scanning: list again and retry.
  for (let attempt = 1; ; attempt++) {
    try {
      return await runInWorker(q, await resolveFiles(layout, q));
    } catch (err) {
      if (attempt >= MAX_ATTEMPTS || !isVanishedFile(err)) {
        // A file of the log missing or damaged for good: say which table and day.
        throw (await findDamagedFile(layout, q).catch(() => null)) ?? err;
      }
      await new Promise((r) => setTimeout(r, 5 * attempt));
    }
  }
}
