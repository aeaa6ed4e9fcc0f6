// Builds and runs the polars scan of a read query: one lazy scan over the live Parquet files,
// filters pushed into the scan, newest first by event_ts, limited, projected. Every use of polars
// on the read path is here, so its traps (lossy number literals, Int64 nulls) are avoided in one place.

import pl, { type DataFrame, type DataType, type Expr, type LazyDataFrame } from 'nodejs-polars';
import { type ColumnType, isListType, SCHEMAS, type TableName } from '../schema/tables.ts';
import type { FileEntry } from './files.ts';
import type { NormalizedQuery, RowFilter } from './filters.ts';

/** Rows a filtered query reads in its first round over the newest files; later rounds grow 4x. */
export const FIRST_ROUND_ROWS = 100_000;

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

/**
 * One lazy frame over the files, every column of the table schema present with its type: a file
 * written before a column existed gets nulls, and a narrower integer type is widened.
 */
export function scanFiles(
  table: TableName,
  paths: readonly string[],
  cloudOptions?: Record<string, string>,
): LazyDataFrame {
  const schema = tableSchema(table);
  if (paths.length === 0) return emptyFrame(table).lazy();
  const scans = paths.map((p) =>
    pl.scanParquet(p, {
      schema,
      missingColumns: 'insert',
      extraColumns: 'ignore',
      castOptions: { integerCast: 'upcast' },
      // s3:// files: every value a string (see S3Settings.polarsCloudOptions).
      ...(cloudOptions && p.startsWith('s3://') ? { cloudOptions } : {}),
    }),
  );
  return scans.length === 1 ? scans[0]! : pl.concat(scans, { how: 'vertical' });
}

export function emptyFrame(table: TableName): DataFrame {
  // Series(name, [], List(...)) throws: build untyped empty series and cast them.
  return pl.DataFrame(SCHEMAS[table].columns.map((c) => pl.Series(c.name, []).cast(polarsType(c.type))));
}

function filterExpr(table: TableName, f: RowFilter): Expr {
  const column = pl.col(f.column);
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

/** Filters, newest first, limit and projection onto `columns`. */
function applyQuery(lf: LazyDataFrame, q: NormalizedQuery, columns: readonly string[]): LazyDataFrame {
  let out = lf;
  if (q.filters.length > 0) {
    const predicate = q.filters.map((f) => filterExpr(q.table, f)).reduce((a, b) => a.and(b));
    out = out.filter(predicate);
  }
  out = out.sort('event_ts', true, true);
  if (q.maxRows !== null) out = out.limit(q.maxRows);
  return out.select(...columns);
}

/** The query as one lazy frame over the given files (the caller collects it). */
export function buildLazy(
  q: NormalizedQuery,
  files: readonly FileEntry[],
  cloudOptions?: Record<string, string>,
): LazyDataFrame {
  return applyQuery(
    scanFiles(
      q.table,
      files.map((f) => f.path),
      cloudOptions,
    ),
    q,
    q.select,
  );
}

function tsAt(df: DataFrame, index: number): bigint {
  return df.getColumn('event_ts').cast(pl.Int64).slice(index, 1).toTypedArray()[0] as bigint;
}

/**
 * Runs the query with the synchronous API (call it in a worker). With maxRows, files are read
 * newest first in rounds; once maxRows rows are found, files whose newest event_ts is older than
 * the oldest row kept cannot contribute and are never opened.
 */
export function runQuery(
  q: NormalizedQuery,
  files: readonly FileEntry[],
  firstRoundRows = FIRST_ROUND_ROWS,
  cloudOptions?: Record<string, string>,
): DataFrame {
  if (files.length === 0) return emptyFrame(q.table).select(...q.select);
  const maxRows = q.maxRows;
  if (maxRows === null) return buildLazy(q, files, cloudOptions).collectSync();

  const keep = q.select.includes('event_ts') ? q.select : [...q.select, 'event_ts'];
  const ordered = [...files].sort(newestFirst);
  let result: DataFrame | null = null;
  let threshold: bigint | null = null;
  let budget = q.filters.length === 0 ? maxRows : Math.max(maxRows, firstRoundRows);
  let i = 0;
  while (i < ordered.length) {
    const round: string[] = [];
    let rows = 0;
    while (i < ordered.length && (round.length === 0 || rows < budget)) {
      const f = ordered[i]!;
      if (threshold !== null && f.maxTs !== null && f.maxTs < threshold) {
        i = ordered.length; // sorted by maxTs: every remaining file is older still
        break;
      }
      round.push(f.path);
      rows += f.numRecords ?? budget;
      i++;
    }
    if (round.length === 0) break;
    const part = applyQuery(scanFiles(q.table, round, cloudOptions), q, keep).collectSync();
    result =
      result === null
        ? part
        : pl.concat([result, part], { how: 'vertical' }).sort('event_ts', true, true).head(maxRows);
    if (result.height >= maxRows) threshold = tsAt(result, maxRows - 1);
    budget *= 4;
  }
  return result!.select(...q.select);
}

/** Files with the newest data first; unknown bounds first (they can never be skipped). */
export function newestFirst(a: FileEntry, b: FileEntry): number {
  if (a.maxTs === b.maxTs) return 0;
  if (a.maxTs === null) return -1;
  if (b.maxTs === null) return 1;
  return a.maxTs > b.maxTs ? -1 : 1;
}
