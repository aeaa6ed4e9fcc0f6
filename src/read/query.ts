// The read API shared by the library, the HTTP /api endpoints and the CLI viewer. A query lists
// the live files of its days, then runs in two steps in query workers (polars, synchronous API):
// the keys of the rows that answer it, in order, then those rows in slices of a bounded size
// (the first read in the keys' task, so that a small read is one task), each handed back as an
// Arrow IPC buffer and turned into rows in the main thread without stalling the loop, or
// (streamJson, for the HTTP answers) as the rows' JSON text, built in the worker. Callers take
// the slices one at a time (streamRows), so memory follows a slice, not the whole answer;
// readTable collects them, up to maxBytes.

import { availableParallelism } from 'node:os';
import type { LazyDataFrame } from 'nodejs-polars';
import type { Row, TableName } from '../schema/tables.ts';
import type { InstanceLayout } from '../storage/layout.ts';
import { ObjectStoreError } from '../storage/object-store.ts';
import { type ResolvedS3, resolveS3 } from '../storage/s3-config.ts';
import { siblingModule, WorkerPool } from '../storage/worker-pool.ts';
import { DamagedTableError, type FileEntry, findDamagedFile, pruneForNewest, resolveFiles } from './files.ts';
import { type NormalizedQuery, normalizeQuery, type ReadQuery } from './filters.ts';
import type { CountTask, FetchResult, JsonResult, KeysResult, KeysTask } from './query-worker.ts';
import type { CloudOptions, CutValue, RangePart, RangeTask } from './scan.ts';
import { FIRST_EXPANSION, type FirstSlice, fileBytesPerRow, sliceRows, sliceTask } from './slices.ts';

/** Rows of a query worker's Arrow IPC answer; apache-arrow (~20 MiB) is loaded by the first read. */
async function rowsOf(ipc: Uint8Array): Promise<Row[]> {
  const { rowsFromIpc } = await import('./arrow-rows.ts');
  return rowsFromIpc(ipc);
}

export type { FileEntry } from './files.ts';
export { DamagedTableError, StorageUnavailableError } from './files.ts';
export type { NormalizedQuery, ReadQuery, RowFilter, Storage } from './filters.ts';
export {
  DEFAULT_MAX_BYTES,
  filtersOf,
  METRIC_TYPES,
  normalizeQuery,
  STORAGES,
  validateQuery,
} from './filters.ts';
export { isoFromMicros, type JsonValue, rowToJson } from './json.ts';
export type { CutValue } from './scan.ts';
export { TIME_BOUND_FORMATS } from './window.ts';

export interface ReadOptions {
  /** 'objects' (default): plain rows; 'lazy': a polars LazyDataFrame the caller collects. */
  returnAs?: 'objects' | 'lazy';
  /** Aborting it cancels the read: it rejects with the signal's reason, and its work stops. */
  signal?: AbortSignal;
  /** Object-storage settings for shipped days; default: the environment's. */
  s3?: ResolvedS3;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Bytes of values a slice of rows aims at (one row at least); default 4 MiB. */
  chunkBytes?: number;
  /** Receives the version each table (folder or object key) was read at (-1: no table yet). */
  versions?: Map<string, number>;
  /** Object-storage settings for shipped days; default: the environment's. */
  s3?: ResolvedS3;
}

/** A slice of a read's rows, in read order. */
export interface ReadChunk {
  rows: Row[];
  /** String values cut to maxFieldChars; `row` indexes `rows`. */
  cuts: CutValue[];
  /** Bytes of the slice's values (its Arrow form). */
  bytes: number;
}

/** A slice of a read's rows as the HTTP answer's JSON text: the read's worker hands it over whole. */
export type JsonChunk = JsonResult;

/** The worker task that reads a slice (R), and how its result becomes the slice the caller gets. */
interface SliceForm<R, C extends { bytes: number }> {
  task: 'fetch' | 'json';
  finish(result: R): Promise<C>;
}

const AS_ROWS: SliceForm<FetchResult, ReadChunk> = {
  task: 'fetch',
  finish: async (r: FetchResult) => ({ rows: await rowsOf(r.ipc), cuts: r.cuts, bytes: r.ipc.byteLength }),
};

const AS_JSON: SliceForm<JsonResult, JsonChunk> = {
  task: 'json',
  finish: async (r) => r,
};

/** A result collected in memory grew beyond the query's maxBytes. */
export class ReadLimitError extends Error {
  readonly limit: number;
  constructor(limit: number) {
    super(
      `the result of this read exceeds maxBytes (${limit} bytes): ask for fewer rows (maxRows) or ` +
        'columns (select), narrow it (since, until, filters), cut long values (maxFieldChars), ' +
        'read it as a stream (streamRows, Logger.readStream), or raise maxBytes',
    );
    this.name = 'ReadLimitError';
    this.limit = limit;
  }
}

/** Query workers are replaced after this many tasks: native memory of polars stays bounded. */
const RECYCLE_AFTER = 64;

/** Slice size of streams (HTTP, CLI) and of results collected in memory (fewer, larger slices). */
export const STREAM_CHUNK_BYTES = 4 * 1024 * 1024;
const COLLECT_CHUNK_BYTES = 32 * 1024 * 1024;

let pool: WorkerPool | null = null;
/** Set by runReadsInProcesses: the memory limit the read processes plan for, in bytes. */
let processesFor: (() => number) | null = null;

/**
 * Reads run in child processes from now on, not threads (the server's choice, made at start):
 * a read that outgrows the memory limit is then what the kernel kills, not the server with its
 * ingest. Such a process stops once idle for READ_PROCESS_IDLE_MS, or once a task leaves it
 * holding more than a quarter of the memory limit (`memoryLimitBytes`, asked when the first one
 * starts), and gives its memory back; it is stopped once it and the server hold more than
 * readMemoryCeiling of that limit.
 */
export function runReadsInProcesses(memoryLimitBytes: () => number): void {
  processesFor = memoryLimitBytes;
}

/** A read process's oom_score_adj: the kernel's out-of-memory killer picks it first. */
const READ_PROCESS_OOM_SCORE_ADJ = 1000;
/** A read process idle this long stops; the next read starts one (~0.3 s and 65 MiB here). */
const READ_PROCESS_IDLE_MS = 5_000;

/**
 * The anonymous memory the server and its read processes may hold together: the memory limit less
 * room for the pages of their code (a quarter of it, up to 512 MiB). Past it the largest read
 * process is stopped. Left to the kernel, a read in a 256 MiB cgroup (v1) with the server holding
 * 164 MiB and the read 57 MiB ran 74 s, once 15 min, before the out-of-memory killer took it:
 * 28 MiB were left for the code of both, read back from disk as fast as it was dropped, and the
 * server's ingest crawled with the read.
 */
export function readMemoryCeiling(memoryLimitBytes: number): number {
  return memoryLimitBytes - Math.min(memoryLimitBytes / 4, 512 * 1024 * 1024);
}

function queryPool(): WorkerPool {
  pool ??= new WorkerPool(siblingModule(import.meta.url, 'query-worker'), {
    name: 'otelake-query',
    size: Math.max(1, Math.min(2, availableParallelism())),
    recycleAfter: RECYCLE_AFTER,
    ...(processesFor
      ? {
          isolation: 'process',
          oomScoreAdj: READ_PROCESS_OOM_SCORE_ADJ,
          idleMs: READ_PROCESS_IDLE_MS,
          retireAboveAnonymousBytes: processesFor() / 4,
          stopAboveCombinedAnonymousBytes: readMemoryCeiling(processesFor()),
        }
      : {}),
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
 * short pause growing between them (up to 50 ms; ~0.6 s in all) so that a reader is not starved
 * by a busy writer: on a loaded machine such a writer outran 8 listings.
 */
export const MAX_ATTEMPTS = 16;

/** A file listed as live was removed (vacuumed, compacted, day cleaned) before it was scanned. */
function isVanishedFile(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err);
  return /No such file or directory|os error 2\b|ENOENT|not found|missing commit/i.test(message);
}

/**
 * Test seams: a step between listing the files and scanning them; the first-round size; a step
 * before each slice of rows is handed out (numbered from 0; the first is read with the keys, the
 * others after the step); each task a read gives a query worker, named.
 */
export const readHooks: {
  afterListing?: (files: readonly FileEntry[]) => Promise<void>;
  firstRoundRows?: number;
  beforeSlice?: (slice: number, files: readonly FileEntry[]) => Promise<void>;
  onTask?: (task: string) => void;
} = {};

/** polars' options for the s3:// files among `files`, if any. */
function cloudOptionsFor(files: readonly FileEntry[], s3: ResolvedS3): CloudOptions | undefined {
  return s3.settings && files.some((f) => f.path.startsWith('s3://'))
    ? s3.settings.polarsCloudOptions()
    : undefined;
}

/** Listings a read has made so far: every retry of one read counts against MAX_ATTEMPTS. */
interface Attempts {
  n: number;
}

/** After a file vanished: true (once paused) when the read may list again, false when it must fail. */
async function mayRetry(err: unknown, attempts: Attempts): Promise<boolean> {
  if (attempts.n >= MAX_ATTEMPTS || !isVanishedFile(err)) return false;
  await new Promise((r) => setTimeout(r, Math.min(50, 5 * attempts.n)));
  return true;
}

/**
 * The error a read that cannot go on fails with: when a file of a local table's log is missing or
 * broken for good, a DamagedTableError naming the table and day; else `err` itself (object storage
 * failing included).
 */
async function readFailure(
  err: unknown,
  layout: InstanceLayout,
  q: NormalizedQuery,
  opts: { signal?: AbortSignal | undefined; s3: ResolvedS3 },
): Promise<unknown> {
  if (
    err instanceof ReadLimitError ||
    err instanceof DamagedTableError ||
    err instanceof TypeError ||
    err instanceof ObjectStoreError
  )
    return err;
  if (opts.signal?.aborted) return err;
  return (await findDamagedFile(layout, q, opts.s3).catch(() => null)) ?? err;
}

/**
 * The files of a query, the keys of its rows and its first slice (`first`, read in the same task:
 * a small read is one round trip to a query worker, and waits for none of its collections),
 * listing again when files vanish under it.
 */
async function findRows<R>(
  layout: InstanceLayout,
  q: NormalizedQuery,
  opts: StreamOptions & { s3: ResolvedS3 },
  attempts: Attempts,
  first: FirstSlice,
): Promise<{ files: FileEntry[] } & KeysResult<R>> {
  const { signal, s3 } = opts;
  for (;;) {
    signal?.throwIfAborted();
    attempts.n++;
    const files = await resolveFiles(layout, q, { s3, versions: opts.versions });
    try {
      await readHooks.afterListing?.(files);
      const task: KeysTask = {
        query: q,
        files,
        firstRoundRows: readHooks.firstRoundRows,
        cloudOptions: cloudOptionsFor(files, s3),
        first,
      };
      readHooks.onTask?.('keys');
      return { files, ...(await queryPool().run<KeysResult<R>>('keys', task, [], signal)) };
    } catch (err) {
      if (!(await mayRetry(err, attempts))) throw await readFailure(err, layout, q, opts);
    }
  }
}

/**
 * The rows of a query in read order, a slice at a time: each slice holds about `chunkBytes` of
 * values (one row at least), and the next is read only when the caller asks for it. Before the
 * first slice, files vanished under the query make it list again; after it, they fail the stream.
 * Aborting `signal` stops it (it throws the signal's reason).
 */
export async function* streamRows(
  layout: InstanceLayout,
  table: TableName,
  query: ReadQuery = {},
  opts: StreamOptions = {},
): AsyncGenerator<ReadChunk, void, undefined> {
  const q = normalizeQuery(table, query);
  yield* streamNormalized(layout, q, { ...opts, s3: opts.s3 ?? resolveS3() }, { n: 0 }, AS_ROWS);
}

/**
 * The slices of streamRows as JSON text (rowToJson's), built where the query runs: the caller's
 * thread only passes the bytes on (the HTTP answers).
 */
export async function* streamJson(
  layout: InstanceLayout,
  table: TableName,
  query: ReadQuery = {},
  opts: StreamOptions = {},
): AsyncGenerator<JsonChunk, void, undefined> {
  const q = normalizeQuery(table, query);
  yield* streamNormalized(layout, q, { ...opts, s3: opts.s3 ?? resolveS3() }, { n: 0 }, AS_JSON);
}

async function* streamNormalized<R, C extends { bytes: number }>(
  layout: InstanceLayout,
  q: NormalizedQuery,
  opts: StreamOptions & { s3: ResolvedS3 },
  attempts: Attempts,
  form: SliceForm<R, C>,
): AsyncGenerator<C, void, undefined> {
  const { signal } = opts;
  const chunkBytes = opts.chunkBytes ?? STREAM_CHUNK_BYTES;
  const first: FirstSlice = { task: form.task, bytes: chunkBytes };
  const { files, keys, firstSlice } = await findRows<R>(layout, q, opts, attempts, first);
  let expansion = FIRST_EXPANSION;
  let start = 0;
  for (let slice = 0; start < keys.file.length; slice++) {
    await readHooks.beforeSlice?.(slice, files);
    signal?.throwIfAborted();
    let n: number;
    let result: R;
    // The worker read the first slice with the keys whenever there are keys.
    if (slice === 0) ({ rows: n, result } = firstSlice!);
    else {
      n = sliceRows(keys, start, files, chunkBytes, expansion, Number.POSITIVE_INFINITY);
      const task = sliceTask(q, keys, start, n, files, cloudOptionsFor(files, opts.s3));
      readHooks.onTask?.(form.task);
      try {
        result = await queryPool().run<R>(form.task, task, [], signal);
      } catch (err) {
        throw await readFailure(err, layout, q, opts);
      }
    }
    const chunk = await form.finish(result);
    signal?.throwIfAborted();
    // Learn how many bytes of values a byte of these files holds.
    let fileBytes = 0;
    for (let i = start; i < start + n; i++) fileBytes += fileBytesPerRow(keys, i, files);
    if (fileBytes > 0) expansion = Math.max(0.01, chunk.bytes / fileBytes);
    start += n;
    yield chunk;
  }
}

/**
 * The rows of ranges of files (positions in the files) that pass the query, in the order of the
 * parts and of the rows in their files.
 */
export async function readRanges(
  q: NormalizedQuery,
  parts: RangePart[],
  signal?: AbortSignal,
): Promise<Row[]> {
  if (parts.length === 0) return [];
  const task: RangeTask = { query: q, parts };
  return rowsOf(await queryPool().run<Uint8Array>('range', task, [], signal));
}

/**
 * Reads rows of a table in read order: newest first by event_ts, then by the nanosecond time it
 * came from, then newest arrival first. Every query re-reads the listing of each table's Delta log
 * (a table is reloaded when its log changed), so a reader sees what a concurrent writer committed;
 * a file vacuumed under the query makes it list again and retry (up to MAX_ATTEMPTS listings).
 * `dateFrom`/`dateTo` select the day folders (UTC day of arrival); `since`/`until` select rows by
 * event_ts (and the day folders that can hold them). Rows are collected up to `maxBytes` of
 * values (ReadLimitError beyond). The lazy frame is built in the calling thread; collect it with
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
  const s3 = opts.s3 ?? resolveS3();

  if (returnAs === 'lazy') {
    let files = await resolveFiles(layout, q, { s3 });
    if (q.maxRows !== null && q.filters.length === 0 && q.sinceUs === null && q.untilUs === null)
      files = pruneForNewest(files, q.maxRows);
    const { buildLazy } = await import('./scan.ts');
    return buildLazy(q, files, cloudOptionsFor(files, s3));
  }

  // Nothing is handed out before the end: a file vanished at any step (or a day's local copy
  // cleaned once it was verified remotely) restarts the whole read.
  const attempts: Attempts = { n: 0 };
  for (;;) {
    try {
      const rows: Row[] = [];
      let bytes = 0;
      for await (const chunk of streamNormalized(
        layout,
        q,
        {
          chunkBytes: COLLECT_CHUNK_BYTES,
          s3,
          ...(opts.signal ? { signal: opts.signal } : {}),
        },
        attempts,
        AS_ROWS,
      )) {
        bytes += chunk.bytes;
        if (bytes > q.maxBytes) throw new ReadLimitError(q.maxBytes);
        for (const row of chunk.rows) rows.push(row);
      }
      return rows;
    } catch (err) {
      if (!(await mayRetry(err, attempts)))
        throw await readFailure(err, layout, q, { signal: opts.signal, s3 });
    }
  }
}

/** Rows in the files of a table, counted by reading them (local paths or s3:// URIs). */
export async function countRows(
  table: TableName,
  paths: string[],
  cloudOptions?: CloudOptions,
): Promise<number> {
  const task: CountTask = { table, paths, cloudOptions };
  return queryPool().run<number>('count', task);
}
