// ColumnBatch -> polars DataFrame, exactly (see notes/nodejs-polars.md): int64 from BigInt64Array,
// nulls applied with a validity mask, timestamps cast from Int64 to Datetime('us','UTC').

import pl from 'nodejs-polars';
import type { ColumnDef } from '../schema/tables.ts';
import type { ColumnBatch, ColumnData } from './batch.ts';

const MASK_PREFIX = '__valid__';

export function batchFrame(columns: readonly ColumnDef[], batch: ColumnBatch): pl.DataFrame {
  const series: pl.Series[] = [];
  const exprs: pl.Expr[] = [];
  for (const def of columns) {
    const col = batch.columns[def.name];
    if (!col) throw new Error(`batch has no column ${def.name}`);
    const name = def.name;
    let expr = pl.col(name);
    if ('valid' in col && col.valid !== null) {
      const valid = col.valid;
      const mask = new Array<boolean>(batch.numRows);
      for (let i = 0; i < batch.numRows; i++) mask[i] = valid[i] === 1;
      series.push(pl.Series(MASK_PREFIX + name, mask, pl.Bool));
      expr = pl
        .when(pl.col(MASK_PREFIX + name))
        .then(expr)
        .otherwise(pl.lit(null));
    }
    series.push(valuesSeries(name, col, batch.numRows));
    if (col.kind === 'timestamp') expr = expr.cast(pl.Datetime('us', 'UTC'));
    exprs.push(expr.alias(name));
  }
  return pl.DataFrame(series).select(...exprs);
}

function valuesSeries(name: string, col: ColumnData, n: number): pl.Series {
  switch (col.kind) {
    case 'string':
      return pl.Series(name, col.values.slice(0, n), pl.Utf8);
    case 'long':
    case 'timestamp':
      return pl.Series(name, col.values.subarray(0, n));
    case 'integer':
      return pl.Series(name, col.values.subarray(0, n));
    case 'double':
      return pl.Series(name, col.values.subarray(0, n));
    case 'boolean': {
      const out = new Array<boolean>(n);
      for (let i = 0; i < n; i++) out[i] = col.values[i] === 1;
      return pl.Series(name, out, pl.Bool);
    }
    case 'list_long':
      return listSeries(name, col.values.slice(0, n), pl.List(pl.Int64));
    case 'list_double':
      return listSeries(name, col.values.slice(0, n), pl.List(pl.Float64));
  }
}

/** Polars rejects a list dtype when no row holds a list: build an all-null series and cast it. */
function listSeries(
  name: string,
  values: (BigInt64Array | Float64Array | null)[],
  dtype: pl.DataType,
): pl.Series {
  if (values.some((v) => v !== null)) return pl.Series(name, values, dtype);
  return pl.Series(name, values).cast(dtype);
}
