// ColumnBatch -> polars frame, exactly and fast: the batch's buffers become an Arrow IPC
// stream (typed arrays used as they are, validity masks packed into bitmaps, strings encoded to
// UTF-8 once, timestamps typed as microseconds UTC) that polars reads in one native call; in
// large batches repeated strings cross once and a lazy forward fill puts them back. Building
// polars Series value by value and masking nulls with expressions costs ~100x more per batch.

import {
  Bool,
  type Data,
  type DataType,
  Field,
  Float64,
  Int32,
  Int64,
  List,
  makeData,
  makeVector,
  Table,
  TimestampMicrosecond,
  tableToIPC,
  Utf8,
  type Vector,
} from 'apache-arrow';
import pl from 'nodejs-polars';
import type { ColumnDef } from '../schema/tables.ts';
import { type ColumnBatch, type ColumnData, expandRepeats, utf8Of } from './batch.ts';

/**
 * Packs a 0/1 byte mask into an Arrow validity bitmap, null when every row is valid; rows marked
 * in `repeats` count as null too (their value is filled in by polars, see batchFrame).
 */
function bitmap(
  valid: Uint8Array | null,
  n: number,
  repeats: Uint8Array | null = null,
): { bits: Uint8Array | null; nulls: number } {
  if (valid === null && repeats === null) return { bits: null, nulls: 0 };
  const bits = new Uint8Array((n + 7) >> 3);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if ((valid === null || valid[i] === 1) && (repeats === null || repeats[i] !== 1))
      bits[i >> 3]! |= 1 << (i & 7);
    else nulls++;
  }
  return nulls === 0 ? { bits: null, nulls: 0 } : { bits, nulls };
}

/** Bool column data, true where `valid` is not 1 (the real nulls of a column with repeats). */
function nullsOf(valid: Uint8Array, n: number): Data {
  const data = new Uint8Array((n + 7) >> 3);
  for (let i = 0; i < n; i++) if (valid[i] !== 1) data[i >> 3]! |= 1 << (i & 7);
  return makeData({ type: new Bool(), length: n, nullCount: 0, data });
}

/** Bitmap of the non-null entries of an array column (strings, lists). */
function presentBitmap(values: readonly unknown[], n: number): { bits: Uint8Array | null; nulls: number } {
  const bits = new Uint8Array((n + 7) >> 3);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if (values[i] !== null && values[i] !== undefined) bits[i >> 3]! |= 1 << (i & 7);
    else nulls++;
  }
  return nulls === 0 ? { bits: null, nulls: 0 } : { bits, nulls };
}

function listData<T extends BigInt64Array | Float64Array>(
  values: readonly (T | null)[],
  n: number,
  element: Int64 | Float64,
  make: (len: number) => T,
): Data {
  const offsets = new Int32Array(n + 1);
  let total = 0;
  for (let i = 0; i < n; i++) {
    total += values[i]?.length ?? 0;
    offsets[i + 1] = total;
  }
  const flat = make(total);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v) (flat as BigInt64Array).set(v as BigInt64Array, offsets[i]!);
  }
  const child = makeData({ type: element, length: total, nullCount: 0, data: flat } as never) as Data;
  const { bits, nulls } = presentBitmap(values, n);
  return makeData({
    type: new List(new Field('item', element, false)),
    length: n,
    nullCount: nulls,
    nullBitmap: bits,
    valueOffsets: offsets,
    child,
  } as never) as Data;
}

/** `string` columns are encoded to utf8 first (utf8Of), like built ones. */
type EncodedColumn = Exclude<ColumnData, { kind: 'string' }>;

/** `repeats`: those of a utf8 column that polars fills in (repeatsIn), else null. */
function columnData(col: EncodedColumn, n: number, repeats: Uint8Array | null): Data {
  switch (col.kind) {
    case 'utf8': {
      const { bits, nulls } = bitmap(col.valid, n, repeats);
      const { bytes, offsets } = repeats ? { bytes: col.bytes, offsets: col.offsets } : expandRepeats(col, n);
      return makeData({
        type: new Utf8(),
        length: n,
        nullCount: nulls,
        nullBitmap: bits,
        valueOffsets: offsets.subarray(0, n + 1),
        data: bytes,
      });
    }
    case 'list_long':
      return listData(col.values, n, new Int64(), (len) => new BigInt64Array(len));
    case 'list_double':
      return listData(col.values, n, new Float64(), (len) => new Float64Array(len));
    case 'boolean': {
      const packed = new Uint8Array((n + 7) >> 3);
      for (let i = 0; i < n; i++) if (col.values[i] === 1) packed[i >> 3]! |= 1 << (i & 7);
      const { bits, nulls } = bitmap(col.valid, n);
      return makeData({ type: new Bool(), length: n, nullCount: nulls, nullBitmap: bits, data: packed });
    }
    default: {
      const types: Record<string, DataType> = {
        long: new Int64(),
        timestamp: new TimestampMicrosecond('UTC'),
        integer: new Int32(),
        double: new Float64(),
      };
      const { bits, nulls } = bitmap(col.valid, n);
      return makeData({
        type: types[col.kind],
        length: n,
        nullCount: nulls,
        nullBitmap: bits,
        data: col.values.subarray(0, n),
      } as never) as Data;
    }
  }
}

/**
 * Below this many rows a batch's repeats are expanded here: polars' fill costs a plan per file,
 * more than copying the few repeated bytes of a small batch (library ingest with 1,000-row files
 * was 6-15% slower with the fill).
 */
const REFILL_MIN_ROWS = 8192;

/** The repeats of a utf8 column that polars fills in (see REFILL_MIN_ROWS), if any. */
function repeatsIn(col: ColumnData, n: number): Uint8Array | null {
  if (col.kind !== 'utf8' || !col.repeats || n < REFILL_MIN_ROWS) return null;
  const repeats = col.repeats.subarray(0, n);
  return repeats.includes(1) ? repeats : null;
}

/** A column whose repeat rows cross as nulls; `nulls` names the Bool column of its real nulls. */
interface Refill {
  name: string;
  nulls: string | null;
}

/**
 * The batch as an Arrow table with the schema's column order and types, except that a string
 * column's repeat rows are null (each value crosses once); `refills` says what to fill back.
 * Columns of the real nulls of such columns follow the schema's.
 */
export function batchTable(
  columns: readonly ColumnDef[],
  batch: ColumnBatch,
): { table: Table; refills: Refill[] } {
  const n = batch.numRows;
  const vectors: Record<string, Vector> = {};
  const refills: Refill[] = [];
  const extra: Record<string, Vector> = {};
  for (const def of columns) {
    const given = batch.columns[def.name];
    if (!given) throw new Error(`batch has no column ${def.name}`);
    const col = given.kind === 'string' ? utf8Of(given.values, n) : given;
    const repeats = repeatsIn(col, n);
    vectors[def.name] = makeVector(columnData(col, n, repeats));
    if (repeats === null) continue;
    const valid = (col as { valid: Uint8Array | null }).valid?.subarray(0, n) ?? null;
    const nulls = valid?.includes(0) ? `__nulls_of_${def.name}` : null;
    if (nulls !== null) extra[nulls] = makeVector(nullsOf(valid!, n));
    refills.push({ name: def.name, nulls });
  }
  return { table: new Table({ ...vectors, ...extra }), refills };
}

/** Built once per column: nodejs-polars takes ~2 ms to build each expression object. */
const refillExprs = new Map<string, pl.Expr>();

function refillExpr({ name, nulls }: Refill): pl.Expr {
  const key = `${name}\n${nulls ?? ''}`;
  let expr = refillExprs.get(key);
  if (!expr) {
    const fill = pl.col(name).forwardFill();
    expr = (nulls === null ? fill : pl.when(pl.col(nulls)).then(pl.lit(null)).otherwise(fill)).alias(name);
    refillExprs.set(key, expr);
  }
  return expr;
}

/** The batch as a polars frame in the schema's column order and types, to sink or collect. */
export function batchFrame(columns: readonly ColumnDef[], batch: ColumnBatch): pl.LazyDataFrame {
  const { table, refills } = batchTable(columns, batch);
  // The stream format, read from a view of its bytes: the file format and a copy of the buffer
  // cost twice as much for the same frame.
  const ipc = tableToIPC(table, 'stream');
  const frame = pl.readIPCStream(Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength)).lazy();
  if (refills.length === 0) return frame;
  // A repeat row holds the nearest earlier non-null value: a forward fill, except on real nulls.
  // Polars copies no string bytes for it, where crossing every repeat would (a span's resource
  // attributes are a third of its bytes).
  const filled = refills.map(refillExpr);
  const helpers = refills.flatMap((r) => (r.nulls === null ? [] : [r.nulls]));
  const lazy = frame.withColumns(...filled);
  return helpers.length > 0 ? lazy.drop(helpers) : lazy;
}
