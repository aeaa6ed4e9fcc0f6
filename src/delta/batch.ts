// A batch of rows held column by column, ready to be written as one Parquet file. Numeric columns
// are typed arrays (transferable to a worker without copying, int64 exact as BigInt64Array) with
// an optional validity mask; strings are plain arrays.

import { type ColumnDef, type ColumnType, isListType, type Row, type TableSchema } from '../schema/tables.ts';

export type ColumnData =
  | { kind: 'string'; values: (string | null)[] }
  | { kind: 'long' | 'timestamp'; values: BigInt64Array; valid: Uint8Array | null }
  | { kind: 'integer'; values: Int32Array; valid: Uint8Array | null }
  | { kind: 'double'; values: Float64Array; valid: Uint8Array | null }
  | { kind: 'boolean'; values: Uint8Array; valid: Uint8Array | null }
  | { kind: 'list_long'; values: (BigInt64Array | null)[] }
  | { kind: 'list_double'; values: (Float64Array | null)[] };

export type ColumnKind = ColumnData['kind'];

export interface ColumnBatch {
  readonly numRows: number;
  /** One entry per schema column, in schema order. */
  readonly columns: Readonly<Record<string, ColumnData>>;
}

export function columnKind(type: ColumnType): ColumnKind {
  if (isListType(type)) return type.list === 'long' ? 'list_long' : 'list_double';
  return type;
}

/** Is row `i` of the column non-null? */
export function isValid(column: ColumnData, i: number): boolean {
  switch (column.kind) {
    case 'string':
    case 'list_long':
    case 'list_double':
      return column.values[i] !== null;
    default:
      return column.valid === null || column.valid[i] === 1;
  }
}

/** Buffers to list in `postMessage`'s transfer list so a batch moves to a worker without a copy. */
export function transferables(batch: ColumnBatch): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const c of Object.values(batch.columns)) {
    if ('valid' in c) {
      out.push(c.values.buffer as ArrayBuffer);
      if (c.valid) out.push(c.valid.buffer as ArrayBuffer);
    }
  }
  return out;
}

type Growable = {
  def: ColumnDef;
  kind: ColumnKind;
  // Typed storage for numeric kinds, an array for the others.
  typed: BigInt64Array | Int32Array | Float64Array | Uint8Array | null;
  valid: Uint8Array | null;
  items: unknown[] | null;
  nulls: number;
};

function allocTyped(
  kind: ColumnKind,
  n: number,
): BigInt64Array | Int32Array | Float64Array | Uint8Array | null {
  switch (kind) {
    case 'long':
    case 'timestamp':
      return new BigInt64Array(n);
    case 'integer':
      return new Int32Array(n);
    case 'double':
      return new Float64Array(n);
    case 'boolean':
      return new Uint8Array(n);
    default:
      return null;
  }
}

/**
 * Accumulates validated rows (values already of the column's JS type, see ColumnDef) into
 * columns. `finish()` hands the columns over and resets the builder.
 */
export class BatchBuilder {
  readonly schema: TableSchema;
  private cols: Growable[] = [];
  private capacity: number;
  private length = 0;

  constructor(schema: TableSchema, initialCapacity = 1024) {
    this.schema = schema;
    this.capacity = Math.max(16, initialCapacity);
    this.reset();
  }

  get size(): number {
    return this.length;
  }

  private reset(): void {
    this.length = 0;
    this.cols = this.schema.columns.map((def) => {
      const kind = columnKind(def.type);
      const typed = allocTyped(kind, this.capacity);
      return {
        def,
        kind,
        typed,
        valid: typed ? new Uint8Array(this.capacity) : null,
        items: typed ? null : [],
        nulls: 0,
      };
    });
  }

  private grow(): void {
    const next = this.capacity * 2;
    for (const c of this.cols) {
      if (!c.typed || !c.valid) continue;
      const typed = allocTyped(c.kind, next)!;
      (typed as Uint8Array).set(c.typed as Uint8Array);
      c.typed = typed;
      const valid = new Uint8Array(next);
      valid.set(c.valid);
      c.valid = valid;
    }
    this.capacity = next;
  }

  push(row: Row): void {
    this.pushValues(this.cols.map((c) => row[c.def.name]));
  }

  /** Appends one row given as values in schema column order (the ingest path). */
  pushValues(values: readonly unknown[]): void {
    if (this.length === this.capacity) this.grow();
    const i = this.length++;
    const cols = this.cols;
    for (let j = 0; j < cols.length; j++) {
      const c = cols[j]!;
      const v = values[j];
      if (c.items) {
        if (v === null || v === undefined) {
          c.items.push(null);
          c.nulls++;
        } else if (c.kind === 'list_long') {
          c.items.push(v instanceof BigInt64Array ? v : BigInt64Array.from(v as bigint[]));
        } else if (c.kind === 'list_double') {
          c.items.push(v instanceof Float64Array ? v : Float64Array.from(v as number[]));
        } else {
          c.items.push(v as string);
        }
        continue;
      }
      if (v === null || v === undefined) {
        c.nulls++;
        continue;
      }
      c.valid![i] = 1;
      if (c.kind === 'boolean') (c.typed as Uint8Array)[i] = v ? 1 : 0;
      else (c.typed as Float64Array)[i] = v as number; // bigint into BigInt64Array, number otherwise
    }
  }

  finish(): ColumnBatch {
    const n = this.length;
    const columns: Record<string, ColumnData> = {};
    for (const c of this.cols) {
      if (c.items) {
        columns[c.def.name] = { kind: c.kind, values: c.items } as ColumnData;
      } else {
        const values = c.typed!.slice(0, n);
        const valid = c.nulls === 0 ? null : c.valid!.slice(0, n);
        columns[c.def.name] = { kind: c.kind, values, valid } as ColumnData;
      }
    }
    this.reset();
    return { numRows: n, columns };
  }
}

/** Builds a batch from rows in one call (tests, small writes). */
export function batchFromRows(schema: TableSchema, rows: readonly Row[]): ColumnBatch {
  const b = new BatchBuilder(schema, rows.length);
  for (const r of rows) b.push(r);
  return b.finish();
}
