// Builds and runs the polars scans of a read query. Every use of polars on the read path is here,
// so its traps (lossy number literals, Int64 nulls) are avoided in one place.
//
// A query runs in two steps, so that memory follows the rows a caller takes at a time, not the
// whole answer: `runKeys` finds which rows answer it, in order, reading only the columns it
// filters and orders by; `fetchRows` then reads the selected columns of a slice of those rows.
// Rows are ordered newest first by event_ts, then by the nanosecond time it came from, then by
// arrival (the file's arrival rank, then the row's position in its file).

import pl, { type DataFrame, type DataType, type Expr, type LazyDataFrame, type Series } from 'nodejs-polars';
import { rowGroupStarts } from '../delta/parquet-footer.ts';
import { type ColumnType, EVENT_TIME_SOURCE, isListType, SCHEMAS, type TableName } from '../schema/tables.ts';
import type { FileEntry } from './files.ts';
import type { NormalizedQuery, RowFilter } from './filters.ts';

/** Rows a filtered query reads in its first round over the newest files; later rounds grow 4x. */
export const FIRST_ROUND_ROWS = 100_000;

/**
 * Columns added by the scans: a row's index in its scan (files concatenated in arrival order, so
 * it grows with arrival), its file's arrival rank and position in that file, and its tie time.
 */
const INDEX = '__index';
const FILE = '__file';
const ROW = '__row';
const NANO = '__nano';
/** The order of rows within one scan, and across scans: every key descending, nulls last. */
const SCAN_ORDER = ['event_ts', NANO, INDEX];
const ORDER = ['event_ts', NANO, FILE, ROW];
/** Rows of one scan at most: its row index is 32 bits wide. */
const MAX_SCAN_ROWS = 2 ** 31;

export function polarsType(type: ColumnType): DataType {
  if (isListType(type)) return pl.List(type.list === 'long' ? pl.Int64 : pl.Float64);
  switch (type) {
    case 'string':
      return pl.Utf8;
    case 'long':
      return pl.Int64;
    case 'integer':
      return pl.Int32;
    case 'double':
      return pl.Float64;
    case 'boolean':
      return pl.Bool;
    case 'timestamp':
      return pl.Datetime('us', 'UTC');
  }
}

function tableSchema(table: TableName): Record<string, DataType> {
  const out: Record<string, DataType> = {};
  for (const c of SCHEMAS[table].columns) out[c.name] = polarsType(c.type);
  return out;
}

const SCAN_OPTIONS = {
  missingColumns: 'insert',
  extraColumns: 'ignore',
  castOptions: { integerCast: 'upcast' },
} as const;

/**
 * polars' object-store options for the s3:// files of a read, every value a string (see
 * S3Settings.polarsCloudOptions). They hold secrets: never logged.
 */
export type CloudOptions = Record<string, string>;

/** scanParquet's options for reaching a file: cloud options for s3:// URIs only. */
function reach(path: string, cloud: CloudOptions | undefined): { cloudOptions?: CloudOptions } {
  return cloud && path.startsWith('s3://') ? { cloudOptions: cloud } : {};
}

/**
 * One file as a lazy frame with every column of the table schema (a file written before a
 * column existed gets nulls, a narrower integer type is widened), with its row index from `offset`.
 */
function scanFile(
  table: TableName,
  path: string,
  cloud: CloudOptions | undefined,
  index?: { name: string; offset: number },
): LazyDataFrame {
  return pl.scanParquet(path, {
    schema: tableSchema(table),
    ...SCAN_OPTIONS,
    ...reach(path, cloud),
    ...(index ? { rowIndexName: index.name, rowIndexOffset: index.offset } : {}),
  });
}

/**
 * The named columns, in that order, as one expression: nodejs-polars gives each expression a
 * wrapper of some 200 methods, which took 0.7-0.9 ms to build on a slow day (a lazy select of 17
 * names builds 17). Kept by the array: this module's constant lists build theirs once, and a
 * query's list keeps its expression only as long as the list lives.
 */
function columns(names: readonly string[]): Expr {
  return kept(columnSets, names, () => pl.cols([...names]));
}

const columnSets = new WeakMap<readonly string[], Expr>();

/**
 * `pl.col(name)`, built once per name and shared, as an expression never changes. A lazy sort
 * given names builds a wrapper for each: two names took 1.5 ms on a medium day, against 0.07 given
 * these (an eager sort takes names without wrappers). The names are the tables' columns and this
 * module's own, a bounded set (a wrapper holds ~16 KB of heap).
 */
function col(name: string): Expr {
  return kept(cols, name, () => pl.col(name));
}

const cols = new Map<string, Expr>();

/** The expression `cache` holds for `key`, built and kept the first time it is asked for. */
function kept<K>(
  cache: { get(key: K): Expr | undefined; set(key: K, expr: Expr): unknown },
  key: K,
  build: () => Expr,
): Expr {
  let expr = cache.get(key);
  if (expr === undefined) {
    expr = build();
    cache.set(key, expr);
  }
  return expr;
}

/** One lazy frame over the files, concatenated in the given order (no row index). */
export function scanFiles(
  table: TableName,
  files: readonly Pick<FileEntry, 'path'>[],
  cloud?: CloudOptions,
): LazyDataFrame {
  if (files.length === 0) return emptyFrame(table).lazy();
  const scans = files.map((f) => scanFile(table, f.path, cloud));
  return scans.length === 1 ? scans[0]! : pl.concat(scans, { how: 'vertical' });
}

/**
 * One lazy frame over files with known row counts, in arrival order, each row indexed (INDEX) by
 * its position in the concatenation; `starts` maps an index back to a file and a row.
 */
function indexedScan(
  table: TableName,
  files: readonly FileEntry[],
  cloud: CloudOptions | undefined,
): { lf: LazyDataFrame; starts: number[] } {
  const starts: number[] = [];
  let offset = 0;
  const scans = files.map((f) => {
    starts.push(offset);
    const scan = scanFile(table, f.path, cloud, { name: INDEX, offset });
    offset += f.numRecords!;
    return scan;
  });
  return { lf: scans.length === 1 ? scans[0]! : pl.concat(scans, { how: 'vertical' }), starts };
}

export function emptyFrame(table: TableName): DataFrame {
  // Series(name, [], List(...)) throws: build untyped empty series and cast them.
  return pl.DataFrame(SCHEMAS[table].columns.map((c) => pl.Series(c.name, []).cast(polarsType(c.type))));
}

/** An exact int64 literal (a bare number is Float64, a bigint UInt64). */
function int64(v: bigint): Expr {
  return pl.lit(v.toString()).cast(pl.Int64);
}

function filterExpr(table: TableName, f: RowFilter): Expr {
  const column = col(f.column);
  switch (f.op) {
    case 'eq':
      return column.eq(pl.lit(f.value));
    case 'ge': {
      // A bare number literal compares as Float64: cast it to the column's type.
      const type = SCHEMAS[table].byName.get(f.column)!.type;
      return column.gtEq(pl.lit(f.value).cast(polarsType(type)));
    }
    case 'contains':
      return column.str.contains(String(f.value), true);
  }
}

/** The query's filters and event-time window as one predicate, or null when there is none. */
function predicate(q: NormalizedQuery): Expr | null {
  const parts = q.filters.map((f) => filterExpr(q.table, f));
  // Compared as a timestamp, so that row-group statistics of event_ts prune.
  const ts = (us: bigint) => int64(us).cast(pl.Datetime('us', 'UTC'));
  if (q.sinceUs !== null) parts.push(col('event_ts').gtEq(ts(q.sinceUs)));
  if (q.untilUs !== null) parts.push(col('event_ts').lt(ts(q.untilUs)));
  return parts.length === 0 ? null : parts.reduce((a, b) => a.and(b));
}

/**
 * The nanosecond time a row's event_ts came from, which orders rows sharing an event_ts
 * microsecond: the table's own time (a log's observed time when its time is unset); null for
 * span links, which have none. Built once per table (see `columns`: ~12 expressions for logs).
 */
function nanoKey(table: TableName): Expr {
  return kept(nanoKeys, table, () => buildNanoKey(table));
}

const nanoKeys = new Map<TableName, Expr>();

function buildNanoKey(table: TableName): Expr {
  const source = EVENT_TIME_SOURCE[table];
  if (source === null) return pl.lit(null).cast(pl.Int64).alias(NANO);
  if (table === 'logs') {
    const time = pl.col(source);
    return pl
      .when(time.isNull().or(time.eq(int64(0n))))
      .then(pl.col('observed_time_unix_nano'))
      .otherwise(time)
      .alias(NANO);
  }
  return pl.col(source).alias(NANO);
}

/** Filtered, ordered newest first by `order`, and limited; with `keysOnly` only the keys kept. */
function ordered(lf: LazyDataFrame, q: NormalizedQuery, order: string[], keysOnly: boolean): LazyDataFrame {
  const where = predicate(q);
  let out = (where === null ? lf : lf.filter(where)).withColumns(nanoKey(q.table));
  if (keysOnly) out = out.select(columns(order));
  out = out.sort({ by: order.map(col), descending: true, nullsLast: true });
  return q.maxRows === null ? out : out.limit(q.maxRows);
}

/** String columns cut to `maxChars` characters when longer (null = unchanged), as expressions. */
function projection(table: TableName, select: readonly string[], maxChars: number | null): Expr[] {
  return select.map((name) => {
    const value = col(name);
    if (maxChars === null || SCHEMAS[table].byName.get(name)!.type !== 'string') return value;
    return pl
      .when(value.str.lengths().gt(pl.lit(maxChars)))
      .then(value.str.slice(0, maxChars))
      .otherwise(value)
      .alias(name);
  });
}

/** The string columns of `columns`. */
function stringColumns(table: TableName, columns: readonly string[]): string[] {
  return columns.filter((c) => SCHEMAS[table].byName.get(c)?.type === 'string');
}

/** The values longer than `maxChars` of a column of lengths (null: none). */
function longValues(column: string, lengths: Series, maxChars: number): CutValue[] {
  const cuts: CutValue[] = [];
  if (((lengths.max() as number | null) ?? 0) <= maxChars) return cuts;
  (lengths.toArray() as (number | null)[]).forEach((chars, row) => {
    if (chars !== null && chars > maxChars) cuts.push({ row, column, chars });
  });
  return cuts;
}

/**
 * String values of a collected frame longer than `maxChars` cut to that many characters, and
 * listed. Only the columns holding such a value are rewritten: cutting costs polars far more than
 * measuring, even on short values.
 */
function cutLongStrings(
  table: TableName,
  df: DataFrame,
  maxChars: number | null,
): { df: DataFrame; cuts: CutValue[] } {
  if (maxChars === null) return { df, cuts: [] };
  const cuts: CutValue[] = [];
  let out = df;
  for (const column of stringColumns(table, df.columns)) {
    const long = longValues(column, df.getColumn(column).str.lengths(), maxChars);
    if (long.length === 0) continue;
    cuts.push(...long);
    out = out.withColumns(col(column).str.slice(0, maxChars).alias(column));
  }
  return { df: out, cuts };
}

/**
 * The rows of a lazy frame with string values cut within the scan, before a frame of whole values
 * exists: for large values, where memory matters more than the cost of cutting every value.
 */
function collectCut(
  table: TableName,
  lf: LazyDataFrame,
  select: readonly string[],
  maxChars: number,
): { df: DataFrame; cuts: CutValue[] } {
  const strings = stringColumns(table, select);
  const lengths = strings.map((c, i) => col(c).str.lengths().alias(`__len${i}`));
  const df = lf.select(...projection(table, select, maxChars), ...lengths).collectSync();
  const cuts = strings.flatMap((c, i) => longValues(c, df.getColumn(`__len${i}`), maxChars));
  return { df: df.select(...select), cuts };
}

/**
 * The query as one lazy frame over the given files (the caller collects it), in read order: the
 * files are concatenated in arrival order and the rows passing the filters numbered, so that the
 * number orders ties by arrival.
 */
export function buildLazy(
  q: NormalizedQuery,
  files: readonly FileEntry[],
  cloud?: CloudOptions,
): LazyDataFrame {
  const where = predicate(q);
  const scan = scanFiles(q.table, [...files].sort(byArrival), cloud);
  const lf = (where === null ? scan : scan.filter(where)).withRowIndex(INDEX);
  return ordered(lf, { ...q, filters: [], sinceUs: null, untilUs: null }, SCAN_ORDER, false).select(
    ...projection(q.table, q.select, q.maxFieldChars),
  );
}

function byArrival(a: FileEntry, b: FileEntry): number {
  return a.arrival - b.arrival;
}

/** Which rows answer a query, in read order: per row its file's arrival rank and position in it. */
export interface RowKeys {
  /** Arrival rank of the row's file (FileEntry.arrival). */
  file: Int32Array;
  /** Position of the row in its file. */
  row: Int32Array;
  /** The row's event_ts (microseconds). */
  ts: BigInt64Array;
}

/** The keys as typed arrays of their own (transferable, no pointer into polars' memory). */
function keysOf(df: DataFrame): RowKeys {
  return {
    file: Int32Array.from(df.getColumn(FILE).toTypedArray() as Int32Array),
    row: Int32Array.from(df.getColumn(ROW).toTypedArray() as Int32Array),
    ts: BigInt64Array.from(df.getColumn('event_ts').cast(pl.Int64).toTypedArray() as BigInt64Array),
  };
}

/** Files whose row count the statistics do not give get it from their footer. */
function withRowCounts(files: readonly FileEntry[], cloud: CloudOptions | undefined): FileEntry[] {
  return files.map((f) =>
    f.numRecords !== null
      ? f
      : {
          ...f,
          numRecords: pl
            .scanParquet(f.path, reach(f.path, cloud))
            .select(pl.len())
            .collectSync()
            .getColumn('len')
            .get(0) as number,
        },
  );
}

/**
 * The ordered, limited keys of the rows of `files` passing the query: scans of at most
 * MAX_SCAN_ROWS rows, their row indexes turned into (file arrival rank, row in file).
 */
function keysOfFiles(
  q: NormalizedQuery,
  files: readonly FileEntry[],
  cloud: CloudOptions | undefined,
): DataFrame {
  const sorted = withRowCounts(files, cloud).sort(byArrival);
  const parts: DataFrame[] = [];
  for (let i = 0; i < sorted.length; ) {
    const group: FileEntry[] = [];
    let rows = 0;
    while (i < sorted.length && (group.length === 0 || rows + sorted[i]!.numRecords! <= MAX_SCAN_ROWS)) {
      rows += sorted[i]!.numRecords!;
      group.push(sorted[i++]!);
    }
    const { lf, starts } = indexedScan(q.table, group, cloud);
    const df = ordered(lf, q, SCAN_ORDER, true).collectSync();
    const index = df.getColumn(INDEX).toTypedArray() as Uint32Array;
    const file = new Int32Array(index.length);
    const row = new Int32Array(index.length);
    for (let k = 0; k < index.length; k++) {
      const g = lastAtOrBelow(starts, index[k]!);
      file[k] = group[g]!.arrival;
      row[k] = index[k]! - starts[g]!;
    }
    parts.push(df.select('event_ts', NANO).withColumns(pl.Series(FILE, file), pl.Series(ROW, row)));
  }
  return merge(parts, q.maxRows);
}

/** The position of the last value of ascending `values` that is <= `x`. */
function lastAtOrBelow(values: readonly number[], x: number): number {
  let lo = 0;
  let hi = values.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (values[mid]! <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Ordered keys merged, newest first, limited. */
function merge(parts: DataFrame[], maxRows: number | null): DataFrame {
  if (parts.length === 1) return parts[0]!;
  const all = pl.concat(parts, { how: 'vertical' }).sort({ by: ORDER, descending: true, nullsLast: true });
  return maxRows === null ? all : all.head(maxRows);
}

/**
 * The keys of the rows answering the query, with polars' synchronous API (call it in a worker).
 * Only filter and order columns are read. With maxRows, files are read newest first in rounds;
 * once maxRows rows are found, files whose newest event_ts is older than the oldest row kept
 * cannot contribute and are never opened.
 */
export function runKeys(
  q: NormalizedQuery,
  files: readonly FileEntry[],
  firstRoundRows = FIRST_ROUND_ROWS,
  cloud?: CloudOptions,
): RowKeys {
  if (files.length === 0)
    return { file: new Int32Array(0), row: new Int32Array(0), ts: new BigInt64Array(0) };
  const maxRows = q.maxRows;
  if (maxRows === null) return keysOf(keysOfFiles(q, files, cloud));

  const newest = [...files].sort(newestFirst);
  let result: DataFrame | null = null;
  let threshold: bigint | null = null;
  const filtered = q.filters.length > 0 || q.sinceUs !== null || q.untilUs !== null;
  let budget = filtered ? Math.max(maxRows, firstRoundRows) : maxRows;
  let i = 0;
  while (i < newest.length) {
    const round: FileEntry[] = [];
    let rows = 0;
    while (i < newest.length && (round.length === 0 || rows < budget)) {
      const f = newest[i]!;
      if (threshold !== null && f.maxTs !== null && f.maxTs < threshold) {
        i = newest.length; // sorted by maxTs: every remaining file is older still
        break;
      }
      round.push(f);
      rows += f.numRecords ?? budget;
      i++;
    }
    if (round.length === 0) break;
    const part = keysOfFiles(q, round, cloud);
    result = result === null ? part : merge([result, part], maxRows);
    // A file whose newest row equals the threshold may still hold a row winning the tie.
    if (result.height >= maxRows)
      threshold = result
        .getColumn('event_ts')
        .cast(pl.Int64)
        .slice(maxRows - 1, 1)
        .toTypedArray()[0] as bigint;
    budget *= 4;
  }
  return keysOf(result!);
}

/** Files with the newest data first; unknown bounds first (they can never be skipped). */
export function newestFirst(a: FileEntry, b: FileEntry): number {
  if (a.maxTs === b.maxTs) return 0;
  if (a.maxTs === null) return -1;
  if (b.maxTs === null) return 1;
  return a.maxTs > b.maxTs ? -1 : 1;
}

/** Rows of one file to fetch: their positions in the file (ascending) and in the output. */
export interface FetchPart {
  path: string;
  /** Bytes of the file: what reading its rows may decode at most. */
  size: number;
  /** Bytes of the file per row (compressed): large rows have their values cut within the scan. */
  rowBytes: number;
  rows: Uint32Array;
  positions: Uint32Array;
}

/** A string value cut to maxFieldChars: its row in the fetched slice, its column, its length. */
export interface CutValue {
  row: number;
  column: string;
  chars: number;
}

export interface FetchTask {
  table: TableName;
  select: string[];
  maxFieldChars: number | null;
  parts: FetchPart[];
  /** For s3:// files. */
  cloudOptions?: CloudOptions;
}

/** Bytes of files read by one scan of a fetch at most: files beyond it are read in later scans. */
const FETCH_SCAN_BYTES = 32 * 1024 * 1024;
/**
 * Rows of files with more bytes per row than this have their long values cut within the scan
 * (slower: 75 ms more per 100 rows of logs). Rows below it are cut once collected, which holds
 * the whole values of a slice for a moment: a few hundred KB per row, unless values compress
 * more than 100 to 1.
 */
const LARGE_ROW_BYTES = 8 * 1024;

/**
 * The selected columns of the given rows, in output order. Files are read together, in parallel,
 * up to FETCH_SCAN_BYTES of them per scan (a large file alone), so memory follows the files of one
 * scan. String values longer than maxFieldChars are cut, and listed.
 */
export function fetchRows(task: FetchTask): { df: DataFrame; cuts: CutValue[] } {
  const { table, select, maxFieldChars, cloudOptions } = task;
  const positions = task.parts.flatMap((p) => Array.from(p.positions));
  const frames: DataFrame[] = [];
  const cuts: CutValue[] = [];
  let fetched = 0;
  for (let i = 0; i < task.parts.length; ) {
    const scan: FetchPart[] = [];
    let bytes = 0;
    while (i < task.parts.length && (scan.length === 0 || bytes + task.parts[i]!.size <= FETCH_SCAN_BYTES)) {
      bytes += task.parts[i]!.size;
      scan.push(task.parts[i++]!);
    }
    // One scan over the files, each row indexed past the rows of the slices before it; each file
    // sliced to the span of each run of its rows (which prunes row groups); one filter keeps the
    // rows asked for (a filter per file costs several times more).
    const wanted: number[] = [];
    let offset = 0;
    // Each slice's rows are numbered from an offset of its own: polars reads a scan that occurs
    // twice in a plan once, whole, and slices that (a file's every row and column).
    const lazies = scan.flatMap((p) =>
      runsOf(p).map(([from, to]) => {
        const first = p.rows[from]!;
        const last = p.rows[to - 1]!;
        for (let k = from; k < to; k++) wanted.push(offset + p.rows[k]!);
        const lf = scanFile(table, p.path, cloudOptions, { name: ROW, offset }).slice(
          first,
          last - first + 1,
        );
        offset += last + 1;
        return lf;
      }),
    );
    const all = (lazies.length === 1 ? lazies[0]! : pl.concat(lazies, { how: 'vertical' })).filter(
      col(ROW).isIn(pl.Series(ROW, wanted).cast(pl.UInt32).implode()),
    );
    // Cut before the next scan's values are read.
    const cut =
      maxFieldChars !== null && scan.some((p) => p.rowBytes > LARGE_ROW_BYTES)
        ? collectCut(table, all, select, maxFieldChars)
        : cutLongStrings(table, all.select(columns(select)).collectSync(), maxFieldChars);
    const df = cut.df;
    if (df.height !== wanted.length)
      throw new Error(`missing rows in ${scan[0]!.path}: found ${df.height} of ${wanted.length}`);
    for (const c of cut.cuts) cuts.push({ ...c, row: positions[fetched + c.row]! });
    frames.push(cut.df);
    fetched += df.height;
  }
  if (frames.length === 0) return { df: emptyFrame(table).select(...select), cuts: [] };
  const df = (frames.length === 1 ? frames[0]! : pl.concat(frames, { how: 'vertical' }))
    .withColumns(pl.Series('__pos', positions, pl.UInt32))
    .sort('__pos');
  cuts.sort((a, b) => a.row - b.row);
  return { df: df.select(...select), cuts };
}

/** Row groups' first rows of the local files read lately, by path (a data file never changes). */
const rowGroupsOf = new Map<string, number[] | null>();
const ROW_GROUPS_KEPT = 4096;
/** Slices of one file at most; beyond, one slice (each slice's row index starts past the last's). */
const MAX_RUNS = 64;

/**
 * A part's rows in runs, as [from, to) indexes into `rows`: a run ends where a row group holding
 * none of the rows lies between two of them, so that a slice per run leaves it undecoded. Rows
 * far apart in a file are the rule when its rows are not in time order (a day's files all span
 * it): for the newest 100 log records of such a day, one slice a file decoded 1,380,031 of its
 * 2,000,000 rows, with every column (the step's peak RSS 446 MiB; 302 with runs). Files on
 * object storage, and those whose footer cannot be read, are read in one slice.
 */
function runsOf(p: FetchPart): [number, number][] {
  const rows = p.rows;
  let starts = rowGroupsOf.get(p.path);
  if (starts === undefined) {
    try {
      starts = p.path.startsWith('s3://') ? null : rowGroupStarts(p.path);
    } catch {
      starts = null; // the scan says what is wrong with the file
    }
    if (rowGroupsOf.size >= ROW_GROUPS_KEPT) rowGroupsOf.clear();
    rowGroupsOf.set(p.path, starts);
  }
  if (starts === null || starts.length < 3) return [[0, rows.length]];
  const runs: [number, number][] = [];
  let group = -2;
  for (let i = 0; i < rows.length; i++) {
    const g = lastAtOrBelow(starts, rows[i]!);
    if (g > group + 1) runs.push([i, i + 1]);
    else runs[runs.length - 1]![1] = i + 1;
    group = g;
  }
  return runs.length > MAX_RUNS ? [[0, rows.length]] : runs;
}

/** Consecutive rows of one file: `count` rows from position `start`. */
export interface RangePart {
  /** A local file: a follower reads only days that still grow, never shipped ones. */
  path: string;
  start: number;
  count: number;
}

export interface RangeTask {
  query: NormalizedQuery;
  parts: RangePart[];
}

/**
 * The rows of the ranges that pass the query's filters and window, in the order of the parts and
 * of the rows in their files (arrival order), projected and cut like a read's. One file at a time.
 */
export function rangeRows({ query: q, parts }: RangeTask): DataFrame {
  const where = predicate(q);
  const frames = parts.map((p) => {
    const lf = scanFile(q.table, p.path, undefined).slice(p.start, p.count);
    const df = (where === null ? lf : lf.filter(where)).select(columns(q.select)).collectSync();
    return cutLongStrings(q.table, df, q.maxFieldChars).df;
  });
  if (frames.length === 0) return emptyFrame(q.table).select(...q.select);
  return frames.length === 1 ? frames[0]! : pl.concat(frames, { how: 'vertical' });
}
