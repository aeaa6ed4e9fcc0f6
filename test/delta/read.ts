// Reads data files back with polars, exactly, into the JSON row form of rows.ts (for comparing
// what was written with what a reader gets).

import pl from 'nodejs-polars';
import { isListType, type TableSchema } from '../../src/schema/tables.ts';

function exactColumn(name: string, type: TableSchema['columns'][number]['type']): pl.Expr {
  const c = pl.col(name);
  if (isListType(type)) return type.list === 'long' ? c.cast(pl.List(pl.Utf8)) : c;
  if (type === 'long') return c.cast(pl.Utf8);
  if (type === 'timestamp') return c.cast(pl.Int64).cast(pl.Utf8);
  return c;
}

function jsonValue(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
  if (typeof v === 'number' && Object.is(v, -0)) return 0;
  if (Array.isArray(v)) return v.map(jsonValue);
  if (v && typeof v === 'object' && 'length' in v) return Array.from(v as ArrayLike<unknown>, jsonValue);
  return v;
}

/** Rows of the files (sorted by project_id), int64/timestamps as decimal strings. */
export function readRows(paths: readonly string[], schema: TableSchema): Record<string, unknown>[] {
  if (paths.length === 0) return [];
  const scans = paths.map((p) => pl.scanParquet(p));
  const frame = (scans.length === 1 ? scans[0]! : pl.concat(scans))
    .select(...schema.columns.map((c) => exactColumn(c.name, c.type).alias(c.name)))
    .collectSync();
  const columns = schema.columns.map((c) => frame.getColumn(c.name).toArray());
  const rows: Record<string, unknown>[] = [];
  for (let i = 0; i < frame.height; i++) {
    const row: Record<string, unknown> = {};
    schema.columns.forEach((c, j) => {
      row[c.name] = jsonValue(columns[j]![i]);
    });
    rows.push(row);
  }
  return sortRows(rows);
}

export function sortRows<T extends Record<string, unknown>>(rows: T[]): T[] {
  return rows.sort((a, b) => (String(a['project_id']) < String(b['project_id']) ? -1 : 1));
}
