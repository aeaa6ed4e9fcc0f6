// A column batch read back as plain values, row by row, whatever kind each column is stored as
// (for comparing what two ways of building a batch hold).

import type { ColumnBatch, ColumnData } from '../../src/delta/batch.ts';
import { utf8Value } from '../../src/delta/batch.ts';

/** Row i of a column as a plain value (null where invalid; a list as an array). */
export function cell(col: ColumnData, i: number): unknown {
  if (col.kind === 'string') return col.values[i] ?? null;
  if (col.kind === 'list_long' || col.kind === 'list_double') {
    if (col.valid !== null && col.valid[i] !== 1) return null;
    return [...col.items.subarray(col.offsets[i]!, col.offsets[i + 1]!)];
  }
  if (col.kind === 'utf8') return utf8Value(col, i);
  if (col.valid && col.valid[i] !== 1) return null;
  return col.values[i];
}

/** Every row of a batch as its cells, in column order. */
export function cells(batch: ColumnBatch): unknown[][] {
  return Array.from({ length: batch.numRows }, (_, i) => Object.values(batch.columns).map((c) => cell(c, i)));
}
