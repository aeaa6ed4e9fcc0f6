// A batch of rows held column by column, ready to be written as one Parquet file. Numeric columns
// are typed arrays (int64 exact as BigInt64Array) with an optional validity mask. The builder
// encodes strings to UTF-8 as rows arrive (`utf8` columns): the strings die young instead of
// being promoted by the GC, and a batch crosses to a worker as a few buffers rather than as
// hundreds of thousands of strings to clone. `string` columns (arrays) are accepted too.

import { type ColumnDef, type ColumnType, isListType, type Row, type TableSchema } from '../schema/tables.ts';

export type ColumnData =
  | { kind: 'string'; values: (string | null)[] }
  /** UTF-8 bytes of every row; row i is bytes[offsets[i]..offsets[i + 1]]. */
  | {
      kind: 'utf8';
      bytes: Uint8Array;
      offsets: Int32Array;
      valid: Uint8Array | null;
      /** repeats[i] = 1: row i holds the value of an earlier row (statistics need not look at it). */
      repeats?: Uint8Array | null;
    }
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

/** Rows held by a column. */
export function columnLength(column: ColumnData): number {
  return column.kind === 'utf8' ? column.offsets.length - 1 : column.values.length;
}

/** The kind a schema type is stored as; a string column may also come as `utf8`. */
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
    if (c.kind === 'utf8') {
      out.push(c.bytes.buffer as ArrayBuffer, c.offsets.buffer as ArrayBuffer);
      if (c.repeats) out.push(c.repeats.buffer as ArrayBuffer);
    } else if ('valid' in c) out.push(c.values.buffer as ArrayBuffer);
    if ('valid' in c && c.valid) out.push(c.valid.buffer as ArrayBuffer);
  }
  return out;
}

/** False once the batch's buffers were transferred away (and not handed back). */
export function isIntact(batch: ColumnBatch): boolean {
  return transferables(batch).every((b) => !b.detached);
}

/** Strings of a column encoded a chunk at a time: one join and one encode per chunk. */
class Utf8Column {
  private bytes: Uint8Array;
  private view: Buffer;
  private used = 0;
  offsets: Int32Array;
  private repeats: Uint8Array;
  private pending: string[] = [];
  /** Row index of pending[0]. */
  private pendingFrom = 0;
  /** The last non-null value: a row repeating it (same resource, scope, service) is marked. */
  private last: string | null = null;

  constructor(rows: number) {
    this.bytes = new Uint8Array(Math.max(256, rows * 32));
    this.view = Buffer.from(this.bytes.buffer, 0, this.bytes.length);
    this.offsets = new Int32Array(rows + 1);
    this.repeats = new Uint8Array(rows);
  }

  push(s: string | null): void {
    if (s === null) this.pending.push('');
    else {
      if (s === this.last) this.repeats[this.pendingFrom + this.pending.length] = 1;
      this.last = s;
      this.pending.push(s);
    }
    if (this.pending.length === UTF8_CHUNK) this.encode();
  }

  growRows(rows: number): void {
    const offsets = new Int32Array(rows + 1);
    offsets.set(this.offsets);
    this.offsets = offsets;
    const repeats = new Uint8Array(rows);
    repeats.set(this.repeats);
    this.repeats = repeats;
  }

  private reserve(bytes: number): void {
    if (this.used + bytes <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.used + bytes) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.bytes.subarray(0, this.used));
    this.bytes = next;
    this.view = Buffer.from(next.buffer, 0, next.length);
  }

  /** Encodes the pending strings (a lone surrogate becomes U+FFFD, as in any UTF-8 writer). */
  encode(): void {
    const chunk = this.pending;
    if (chunk.length === 0) return;
    const joined = chunk.join('');
    this.reserve(joined.length * 3);
    const start = this.used;
    const written = this.view.write(joined, start, 'utf8');
    let row = this.pendingFrom;
    let pos = start;
    if (written === joined.length) {
      // One byte per UTF-16 unit: all ASCII, so each string's bytes are its length.
      for (const s of chunk) {
        pos += s.length;
        this.offsets[++row] = pos;
      }
    } else {
      // Encode one by one: joining may pair a lone surrogate with the next string's.
      for (const s of chunk) {
        pos += this.view.write(s, pos, 'utf8');
        this.offsets[++row] = pos;
      }
    }
    this.used = pos;
    this.pendingFrom = row;
    this.pending = [];
  }

  finish(rows: number): { bytes: Uint8Array; offsets: Int32Array; repeats: Uint8Array } {
    this.encode();
    // Views, not copies: the builder starts new buffers for its next batch.
    return {
      bytes: this.bytes.subarray(0, this.used),
      offsets: this.offsets.subarray(0, rows + 1),
      repeats: this.repeats.subarray(0, rows),
    };
  }
}

const UTF8_CHUNK = 512;

type Growable = {
  def: ColumnDef;
  kind: ColumnKind;
  // Typed storage for numeric kinds, an array for the others.
  typed: BigInt64Array | Int32Array | Float64Array | Uint8Array | null;
  /** String columns. */
  utf8: Utf8Column | null;
  valid: Uint8Array | null;
  /** List columns. */
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
      const utf8 = kind === 'string' ? new Utf8Column(this.capacity) : null;
      return {
        def,
        kind,
        typed,
        utf8,
        valid: typed || utf8 ? new Uint8Array(this.capacity) : null,
        items: typed || utf8 ? null : [],
        nulls: 0,
      };
    });
  }

  private grow(): void {
    const next = this.capacity * 2;
    for (const c of this.cols) {
      if (c.utf8) c.utf8.growRows(next);
      if (c.typed) {
        const typed = allocTyped(c.kind, next)!;
        (typed as Uint8Array).set(c.typed as Uint8Array);
        c.typed = typed;
      }
      if (c.valid) {
        const valid = new Uint8Array(next);
        valid.set(c.valid);
        c.valid = valid;
      }
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
      if (c.utf8) {
        if (v === null || v === undefined) {
          c.utf8.push(null);
          c.nulls++;
        } else {
          c.utf8.push(v as string);
          c.valid![i] = 1;
        }
        continue;
      }
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
      if (c.utf8) {
        const valid = c.nulls === 0 ? null : c.valid!.subarray(0, n);
        columns[c.def.name] = { kind: 'utf8', ...c.utf8.finish(n), valid };
      } else if (c.items) {
        columns[c.def.name] = { kind: c.kind, values: c.items } as ColumnData;
      } else {
        const values = c.typed!.subarray(0, n);
        const valid = c.nulls === 0 ? null : c.valid!.subarray(0, n);
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
