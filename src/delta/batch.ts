// A batch of rows held column by column, ready to be written as one Parquet file. Numeric columns
// are typed arrays (int64 exact as BigInt64Array) with an optional validity mask; a list column is
// one typed array of every row's elements with offsets, as a utf8 column is bytes with offsets.
// The builder encodes strings to UTF-8 as rows arrive (`utf8` columns): the strings die young
// instead of being promoted by the GC, and a batch crosses to a worker as a few buffers rather
// than as hundreds of thousands of strings to clone. `string` columns (arrays) are accepted too,
// except by packBatch.

import { type ColumnDef, type ColumnType, isListType, type Row, type TableSchema } from '../schema/tables.ts';

export type ColumnData =
  | { kind: 'string'; values: (string | null)[] }
  /** UTF-8 bytes of every row; row i is bytes[offsets[i]..offsets[i + 1]]. */
  | {
      kind: 'utf8';
      bytes: Uint8Array;
      offsets: Int32Array;
      valid: Uint8Array | null;
      /**
       * repeats[i] = 1: row i holds the value of the nearest earlier non-null row and stores no
       * bytes of its own (a span's resource, scope and service are stored once per run of rows).
       * Row 0 never repeats. Use `utf8Value` to read a row.
       */
      repeats?: Uint8Array | null;
    }
  | { kind: 'long' | 'timestamp'; values: BigInt64Array; valid: Uint8Array | null }
  | { kind: 'integer'; values: Int32Array; valid: Uint8Array | null }
  | { kind: 'double'; values: Float64Array; valid: Uint8Array | null }
  | { kind: 'boolean'; values: Uint8Array; valid: Uint8Array | null }
  /** Every row's elements in one array; row i is items[offsets[i]..offsets[i + 1]] (none when null). */
  | { kind: 'list_long'; items: BigInt64Array; offsets: Int32Array; valid: Uint8Array | null }
  | { kind: 'list_double'; items: Float64Array; offsets: Int32Array; valid: Uint8Array | null };

export type ColumnKind = ColumnData['kind'];

export interface ColumnBatch {
  readonly numRows: number;
  /** One entry per schema column, in schema order. */
  readonly columns: Readonly<Record<string, ColumnData>>;
}

/**
 * The rows of one data file: a batch, or batches of the same schema written one after another
 * (the many small batches of the server are joined by the writer's worker, off the event loop).
 */
export type Batches = BatchPart | readonly BatchPart[];

export function batchList(b: Batches): readonly BatchPart[] {
  return Array.isArray(b) ? b : [b as BatchPart];
}

export function batchesRows(b: Batches): number {
  let n = 0;
  for (const part of batchList(b)) n += part.numRows;
  return n;
}

type ArrayCtor<T> = { new (length: number): T; new (b: ArrayBuffer, offset: number, length: number): T };

/**
 * Typed arrays carved out of one buffer that is kept from use to use: a writer joining batch
 * after batch then allocates no new large buffers (each is external memory to V8, and enough of
 * them trigger full GCs). Arrays handed out are overwritten after the next `reset`, and are not
 * zeroed.
 */
export class Arena {
  private buffer = new ArrayBuffer(0);
  private used = 0;
  /** Bytes asked for since the last reset, room or not. */
  private asked = 0;

  /** Starts over, first growing the buffer to what the last round needed (plus a quarter). */
  reset(): void {
    if (this.asked > this.buffer.byteLength) this.buffer = new ArrayBuffer(align(this.asked * 1.25));
    this.used = 0;
    this.asked = 0;
  }

  take<T extends Typed>(C: ArrayCtor<T> & { BYTES_PER_ELEMENT: number }, length: number): T {
    const bytes = align(length * C.BYTES_PER_ELEMENT);
    this.asked += bytes;
    if (this.used + bytes > this.buffer.byteLength) return new C(length); // this round only
    const out = new C(this.buffer, this.used, length);
    this.used += bytes;
    return out;
  }
}

type Alloc = <T extends Typed>(C: ArrayCtor<T> & { BYTES_PER_ELEMENT: number }, length: number) => T;

/**
 * One batch of all the rows of `b` (same schema), each column allocated once at its exact size
 * (from `arena` when given); a single batch is returned as it is. Parts are joined packed (a part
 * given as columns is packed first): each part's arrays are copied from its buffer by the offsets
 * in its header, without a view per column and part, which the writer's worker, joining hundreds
 * of parts of 23-37 columns a file, made by the tens of thousands.
 */
export function joinBatches(b: Batches, names: readonly string[], arena?: Arena): ColumnBatch {
  const list = batchList(b);
  if (list.length === 1) return columnsOf(list[0]!, names);
  arena?.reset();
  const alloc: Alloc = arena ? (C, n) => arena.take(C, n) : (C, n) => new C(n);
  const parts = list.map((p) => (isPacked(p) ? p : packBatch(p, names)));
  const rows = batchesRows(parts);
  const headers = parts.map((p) => {
    const header = new Int32Array(p.packed);
    if (header[0] !== names.length)
      throw new TypeError(`packed batch has ${header[0]} columns, expected ${names.length}`);
    return header;
  });
  const sources = parts.map((p) => Buffer.from(p.packed));
  /** Copies `bytes` bytes at `from` in part `i` to `to` in `out`. */
  const copy = (i: number, from: number, bytes: number, out: Buffer, to: number): void => {
    const source = sources[i]!;
    if (from + bytes > source.length) throw new RangeError('packed batch is truncated');
    source.copy(out, to, from, from + bytes);
  };
  /** A column of one byte a row (validity, repeats) from header slot `h`; `absent` where a part has none. */
  const joinBytes = (h: number, absent: number): Uint8Array | null => {
    if (headers.every((x) => x[h]! < 0)) return null;
    const out = alloc(Uint8Array, rows);
    const target = bytesOf(out);
    let at = 0;
    parts.forEach((p, i) => {
      const from = headers[i]![h]!;
      if (from >= 0) copy(i, from, p.numRows, target, at);
      else out.fill(absent, at, at + p.numRows);
      at += p.numRows;
    });
    return out;
  };
  const columns: Record<string, ColumnData> = {};
  names.forEach((name, j) => {
    const h = 1 + j * PER_COLUMN;
    const code = headers[0]![h]!;
    if (headers.some((x) => x[h] !== code))
      throw new TypeError(`column ${name} differs in kind between parts`);
    const kind = PACKED_KINDS[code]!;
    const valid = joinBytes(h + 4, 1);
    if (kind === 'utf8' || kind === 'list_long' || kind === 'list_double') {
      // Values (bytes or elements) run after run, and their offsets moved with them.
      const C = kind === 'utf8' ? Uint8Array : kind === 'list_long' ? BigInt64Array : Float64Array;
      let size = 0;
      for (const x of headers) size += x[h + 2]!;
      const values = alloc(C as ArrayCtor<Typed> & { BYTES_PER_ELEMENT: number }, size);
      const offsets = alloc(Int32Array, rows + 1);
      const target = bytesOf(values);
      offsets[0] = 0;
      let row = 0;
      let pos = 0;
      parts.forEach((p, i) => {
        const x = headers[i]!;
        const count = x[h + 2]!;
        copy(i, x[h + 1]!, count * C.BYTES_PER_ELEMENT, target, pos * C.BYTES_PER_ELEMENT);
        const o = x[h + 3]! >> 2;
        const shift = pos - x[o]!;
        for (let r = 1; r <= p.numRows; r++) offsets[row + r] = x[o + r]! + shift;
        row += p.numRows;
        pos += count;
      });
      columns[name] =
        kind === 'utf8'
          ? { kind, bytes: values as Uint8Array, offsets, valid, repeats: joinBytes(h + 5, 0) }
          : ({ kind, items: values, offsets, valid } as ListData);
      return;
    }
    const C = VALUE_CTOR[kind]!;
    const values = alloc(C as ArrayCtor<Typed> & { BYTES_PER_ELEMENT: number }, rows);
    const target = bytesOf(values);
    let at = 0;
    parts.forEach((p, i) => {
      copy(i, headers[i]![h + 1]!, p.numRows * C.BYTES_PER_ELEMENT, target, at * C.BYTES_PER_ELEMENT);
      at += p.numRows;
    });
    columns[name] = { kind, values, valid } as ColumnData;
  });
  return { numRows: rows, columns };
}

/** A typed array's bytes, as a Buffer (for `Buffer#copy`, which needs no view of each source range). */
function bytesOf(a: Typed): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

export type Utf8Data = Extract<ColumnData, { kind: 'utf8' }>;
export type ListData = Extract<ColumnData, { kind: 'list_long' | 'list_double' }>;

// --- int64 extremes -----------------------------------------------------------------------------

/** Index of a 64-bit value's high 32-bit word within its pair, in this platform's byte order. */
const HIGH_WORD = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 1 : 0;

/**
 * Rows of the smallest and the largest valid value of an int64 column in [from, to), null when
 * none is valid. Compared as 32-bit halves: each element read from a BigInt64Array is a new
 * BigInt, and the statistics of a file read every value twice (Delta's and Parquet's).
 */
export function int64Extremes(
  values: BigInt64Array,
  valid: Uint8Array | null,
  from: number,
  to: number,
): [number, number] | null {
  const high = new Int32Array(values.buffer, values.byteOffset, values.length * 2);
  const low = new Uint32Array(values.buffer, values.byteOffset, values.length * 2);
  let min = -1;
  let max = -1;
  let minHigh = 0;
  let minLow = 0;
  let maxHigh = 0;
  let maxLow = 0;
  for (let i = from; i < to; i++) {
    if (valid !== null && valid[i] !== 1) continue;
    const h = high[2 * i + HIGH_WORD]!;
    const l = low[2 * i + 1 - HIGH_WORD]!;
    if (min < 0) {
      min = max = i;
      minHigh = maxHigh = h;
      minLow = maxLow = l;
    } else if (h < minHigh || (h === minHigh && l < minLow)) {
      min = i;
      minHigh = h;
      minLow = l;
    } else if (h > maxHigh || (h === maxHigh && l > maxLow)) {
      max = i;
      maxHigh = h;
      maxLow = l;
    }
  }
  return min < 0 ? null : [min, max];
}

// --- repeat rows -------------------------------------------------------------------------------
// The rule of a utf8 column's `repeats` (see ColumnData), in one place: Utf8Column makes them,
// the functions below read, expand and check them.

/** The byte range [start, end) holding the value that repeat row `i` repeats. */
export function repeatedSpan(c: Utf8Data, i: number): [number, number] {
  for (let j = i - 1; j >= 0; j--) {
    if ((c.valid !== null && c.valid[j] !== 1) || c.repeats?.[j] === 1) continue;
    return [c.offsets[j]!, c.offsets[j + 1]!];
  }
  throw new TypeError(`row ${i} repeats a value but no earlier row holds one`);
}

/** Row `i` of a utf8 column as a string (null when null), following repeats. */
export function utf8Value(c: Utf8Data, i: number): string | null {
  if (c.valid !== null && c.valid[i] !== 1) return null;
  const [a, b] = c.repeats?.[i] === 1 ? repeatedSpan(c, i) : [c.offsets[i]!, c.offsets[i + 1]!];
  return Buffer.from(c.bytes.buffer, c.bytes.byteOffset, c.bytes.byteLength).toString('utf8', a, b);
}

/** A repeat row (see ColumnData) stores no bytes, is not null, and has an earlier row to repeat. */
export function checkRepeats(name: string, col: Utf8Data, rows: number): void {
  const { repeats, offsets, valid } = col;
  let held = false; // an earlier row holds a value
  for (let i = 0; i < rows; i++) {
    const isNull = valid !== null && valid[i] !== 1;
    if (repeats![i] !== 1) held ||= !isNull;
    else if (!held || isNull || offsets[i] !== offsets[i + 1])
      throw new TypeError(
        `column ${name}: row ${i} is marked as a repeat but is null, has bytes or has no value to repeat`,
      );
  }
}

/**
 * Refuses a batch that does not fit `table`'s columns: a column missing, of another kind, shorter
 * than the batch, with malformed repeat marks, or null where the schema says not null.
 */
export function checkBatch(table: string, columns: readonly ColumnDef[], batch: ColumnBatch): void {
  for (const def of columns) {
    const col = batch.columns[def.name];
    if (!col) throw new TypeError(`batch for ${table} has no column ${def.name}`);
    const expected = columnKind(def.type);
    if (col.kind !== expected && !(expected === 'string' && col.kind === 'utf8'))
      throw new TypeError(`column ${def.name}: expected ${expected}, got ${col.kind}`);
    if (columnLength(col) < batch.numRows)
      throw new TypeError(`column ${def.name} has fewer rows than the batch`);
    if (col.kind === 'utf8' && col.repeats) checkRepeats(def.name, col, batch.numRows);
    if (!def.nullable) {
      const i = firstNull(col, batch.numRows);
      if (i >= 0) throw new TypeError(`non-nullable column ${def.name} is null in row ${i}`);
    }
  }
}

/** The first of the first `rows` rows that is null (a string column's null, or a validity byte not 1), or -1. */
function firstNull(col: ColumnData, rows: number): number {
  if (col.kind === 'string') {
    for (let i = 0; i < rows; i++) if (col.values[i] === null) return i;
    return -1;
  }
  const valid = col.valid;
  if (valid === null) return -1;
  for (let i = 0; i < rows; i++) if (valid[i] !== 1) return i;
  return -1;
}

/** The first n rows of a string column as a utf8 column, repeats marked as the builder marks them. */
export function utf8Of(values: readonly (string | null)[], n: number): Utf8Data {
  const col = new Utf8Column(n);
  const valid = new Uint8Array(n);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i] ?? null;
    col.push(v);
    if (v === null) nulls++;
    else valid[i] = 1;
  }
  return { kind: 'utf8', ...col.encoded(n), valid: nulls === 0 ? null : valid };
}

// --- columns -----------------------------------------------------------------------------------

/** Rows held by a column. */
export function columnLength(column: ColumnData): number {
  return 'offsets' in column ? column.offsets.length - 1 : column.values.length;
}

/** The kind a schema type is stored as; a string column may also come as `utf8`. */
export function columnKind(type: ColumnType): ColumnKind {
  if (isListType(type)) return type.list === 'long' ? 'list_long' : 'list_double';
  return type;
}

/** Buffers to list in `postMessage`'s transfer list so batches move to a worker without a copy. */
export function transferables(batches: Batches): ArrayBuffer[] {
  // A set: the columns of a packed batch share one buffer, and a transfer list takes it once.
  const out = new Set<ArrayBuffer>();
  const parts = batchList(batches);
  for (const p of parts) if (isPacked(p)) out.add(p.packed);
  for (const c of parts.flatMap((b) => (isPacked(b) ? [] : Object.values(b.columns)))) {
    if (c.kind === 'utf8') {
      out.add(c.bytes.buffer as ArrayBuffer).add(c.offsets.buffer as ArrayBuffer);
      if (c.repeats) out.add(c.repeats.buffer as ArrayBuffer);
    } else if (c.kind === 'list_long' || c.kind === 'list_double') {
      out.add(c.items.buffer as ArrayBuffer).add(c.offsets.buffer as ArrayBuffer);
    } else if ('valid' in c) out.add(c.values.buffer as ArrayBuffer);
    if ('valid' in c && c.valid) out.add(c.valid.buffer as ArrayBuffer);
  }
  return [...out];
}
/** Bytes of the buffers holding the batches (what moving them to a worker moves). */
export function batchBytes(batches: Batches): number {
  let n = 0;
  for (const b of transferables(batches)) n += b.byteLength;
  return n;
}

/** False once the batches' buffers were transferred away (and not handed back). */
export function isIntact(batches: Batches): boolean {
  return transferables(batches).every((b) => !b.detached);
}

// --- packed batches -----------------------------------------------------------------------------
// A batch crossing threads as dozens of typed-array views costs a serialization step per view on
// both sides; packed, it is one ArrayBuffer: a header of int32 (per column: kind and the byte
// offsets of its arrays) followed by the arrays, each 8-byte aligned.

/** A batch packed into one buffer (`packBatch`); `unpackBatch` gives the columns back as views. */
export interface PackedBatch {
  readonly numRows: number;
  readonly packed: ArrayBuffer;
}

/** A batch as the queue and the table writer take it: columns, or packed. */
export type BatchPart = ColumnBatch | PackedBatch;

export function isPacked(b: BatchPart): b is PackedBatch {
  return (b as PackedBatch).packed !== undefined;
}

const PACKED_KINDS = [
  'utf8',
  'long',
  'timestamp',
  'integer',
  'double',
  'boolean',
  'list_long',
  'list_double',
] as const;
/** Header ints per column: kind, then five array offsets or sizes (-1: absent). */
const PER_COLUMN = 6;

type Typed = BigInt64Array | Int32Array | Float64Array | Uint8Array;
type TypedCtor = { new (b: ArrayBuffer, offset: number, length: number): Typed; BYTES_PER_ELEMENT: number };

const align = (n: number) => (n + 7) & ~7;

/**
 * Lays out a packed batch: columns are added in order as their arrays (the first so many elements
 * of each) and `finish` copies them into one buffer. The header is built in a scratch array (a
 * typed array over 64 bytes is an allocation outside V8's heap) and copied with the arrays; one
 * packing at a time, as packing is synchronous.
 */
class Packer {
  private static scratch = new Int32Array(1 + 64 * PER_COLUMN);
  private readonly header: Int32Array;
  private readonly arrays: Typed[] = [];
  private readonly bytes: number[] = [];
  private size: number;
  private column = 0;

  constructor(columns: number) {
    const ints = 1 + columns * PER_COLUMN;
    if (Packer.scratch.length < ints) Packer.scratch = new Int32Array(ints);
    this.header = Packer.scratch;
    this.header[0] = columns;
    this.size = align(ints * 4);
  }

  /** Reserves room for the first `length` elements of `a`: their byte offset, -1 for none. */
  private plan(a: Typed | null, length: number): number {
    if (a === null) return -1;
    const bytes = length * a.BYTES_PER_ELEMENT;
    this.arrays.push(a);
    this.bytes.push(bytes);
    const at = this.size;
    this.size += align(bytes);
    return at;
  }

  private next(
    kind: Exclude<ColumnKind, 'string'>,
    a: number,
    b: number,
    c: number,
    d: number,
    e: number,
  ): void {
    const h = 1 + this.column++ * PER_COLUMN;
    const header = this.header;
    header[h] = PACKED_KINDS.indexOf(kind);
    header[h + 1] = a;
    header[h + 2] = b;
    header[h + 3] = c;
    header[h + 4] = d;
    header[h + 5] = e;
  }

  /** A utf8 column of `n` rows: `offsets` start at 0 and index `bytes`. */
  utf8(
    n: number,
    bytes: Uint8Array,
    offsets: Int32Array,
    valid: Uint8Array | null,
    repeats: Uint8Array | null,
  ): void {
    const size = offsets[n]!;
    this.next(
      'utf8',
      this.plan(bytes, size),
      size,
      this.plan(offsets, n + 1),
      this.plan(valid, n),
      this.plan(repeats, n),
    );
  }

  /** A list column of `n` rows: `offsets` start at 0 and index `items`. */
  list(
    kind: 'list_long' | 'list_double',
    n: number,
    items: BigInt64Array | Float64Array,
    offsets: Int32Array,
    valid: Uint8Array | null,
  ): void {
    const size = offsets[n]!;
    this.next(kind, this.plan(items, size), size, this.plan(offsets, n + 1), this.plan(valid, n), -1);
  }

  /** A column of one value a row. */
  values(
    kind: Exclude<ColumnKind, 'string' | 'utf8' | ListData['kind']>,
    n: number,
    values: Typed,
    valid: Uint8Array | null,
  ): void {
    this.next(kind, this.plan(values, n), -1, -1, this.plan(valid, n), -1);
  }

  finish(numRows: number): PackedBatch {
    // Not zero-filled (half the cost of `new ArrayBuffer` for a request's 20-60 KB): every byte
    // is written below, the alignment gaps too, as the buffer goes to the write-ahead log.
    const packed = Buffer.allocUnsafeSlow(this.size).buffer as ArrayBuffer;
    const ints = 1 + this.column * PER_COLUMN;
    new Int32Array(packed, 0, ints).set(this.header.subarray(0, ints));
    const out = new Uint8Array(packed);
    let at = ints * 4;
    for (let i = 0; i < this.arrays.length; i++) {
      const a = this.arrays[i]!;
      const bytes = this.bytes[i]!;
      const start = align(at);
      if (start !== at) out.fill(0, at, start);
      at = start;
      out.set(new Uint8Array(a.buffer, a.byteOffset, bytes), at);
      at += bytes;
    }
    out.fill(0, at);
    return { numRows, packed };
  }
}

/**
 * Packs the first `numRows` rows of a batch, its columns in the order of `names` (string arrays
 * as utf8); `unpackBatch` takes the names in the same order. A BatchBuilder packs its rows itself
 * (`pack`).
 */
export function packBatch(
  batch: ColumnBatch,
  names: readonly string[] = Object.keys(batch.columns),
): PackedBatch {
  const n = batch.numRows;
  const p = new Packer(names.length);
  for (const name of names) {
    let c = batch.columns[name];
    if (!c) throw new TypeError(`batch has no column ${name}`);
    if (c.kind === 'string') c = utf8Of(c.values, n);
    const valid = c.valid ? c.valid.subarray(0, n) : null;
    if (c.kind === 'utf8' || c.kind === 'list_long' || c.kind === 'list_double') {
      // Offsets rebased to 0 when the column's values do not start at its first.
      const start = c.offsets[0]!;
      const offsets = start === 0 ? c.offsets : c.offsets.subarray(0, n + 1).map((o) => o - start);
      if (c.kind === 'utf8') p.utf8(n, c.bytes.subarray(start), offsets, valid, c.repeats ?? null);
      else p.list(c.kind, n, c.items.subarray(start), offsets, valid);
    } else p.values(c.kind, n, c.values, valid);
  }
  return p.finish(n);
}

const VALUE_CTOR: Record<string, TypedCtor> = {
  long: BigInt64Array,
  timestamp: BigInt64Array,
  integer: Int32Array,
  double: Float64Array,
  boolean: Uint8Array,
};

/** The columns of a packed batch, as views of its buffer (no copy), named in packing order. */
export function unpackBatch(p: PackedBatch, names: readonly string[]): ColumnBatch {
  const n = p.numRows;
  const header = new Int32Array(p.packed, 0, 1 + (new Int32Array(p.packed, 0, 1)[0] ?? 0) * PER_COLUMN);
  if (header[0] !== names.length)
    throw new TypeError(`packed batch has ${header[0]} columns, expected ${names.length}`);
  const view = <T extends Typed>(C: TypedCtor, at: number, len: number): T => new C(p.packed, at, len) as T;
  const opt = (at: number, len: number) => (at < 0 ? null : view<Uint8Array>(Uint8Array, at, len));
  const columns: Record<string, ColumnData> = {};
  names.forEach((name, j) => {
    const h = 1 + j * PER_COLUMN;
    const kind = PACKED_KINDS[header[h]!]!;
    const [a, b, c, d, e] = [header[h + 1]!, header[h + 2]!, header[h + 3]!, header[h + 4]!, header[h + 5]!];
    if (kind === 'utf8') {
      const bytes = view<Uint8Array>(Uint8Array, a, b);
      const offsets = view<Int32Array>(Int32Array, c, n + 1);
      columns[name] = { kind, bytes, offsets, valid: opt(d, n), repeats: opt(e, n) };
    } else if (kind === 'list_long' || kind === 'list_double') {
      const items = view(kind === 'list_long' ? BigInt64Array : Float64Array, a, b);
      const offsets = view<Int32Array>(Int32Array, c, n + 1);
      columns[name] = { kind, items, offsets, valid: opt(d, n) } as ColumnData;
    } else {
      columns[name] = { kind, values: view(VALUE_CTOR[kind]!, a, n), valid: opt(d, n) } as ColumnData;
    }
  });
  return { numRows: n, columns };
}

/** A batch's columns, unpacking it if needed. */
export function columnsOf(b: BatchPart, names: readonly string[]): ColumnBatch {
  return isPacked(b) ? unpackBatch(b, names) : b;
}

/** Rows [from, to) of a batch: the batch itself when that is all of it, else a copy. */
export function sliceBatch(schema: TableSchema, batch: BatchPart, from: number, to: number): BatchPart {
  if (from === 0 && to === batch.numRows) return batch;
  const names = schema.columns.map((c) => c.name);
  const b = new BatchBuilder(schema, to - from);
  b.appendBatch(columnsOf(batch, names), from, to);
  return b.view(); // the builder is dropped: finish() would only allocate its next batch
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
  /** Some row is marked as a repeat (else a packed column leaves the marks out). */
  private repeated = false;

  constructor(rows: number) {
    this.bytes = new Uint8Array(Math.max(256, rows * 32));
    this.view = Buffer.from(this.bytes.buffer, 0, this.bytes.length);
    this.offsets = new Int32Array(rows + 1);
    this.repeats = new Uint8Array(rows);
  }

  push(s: string | null): void {
    if (s === null) this.pending.push('');
    else if (s === this.last) {
      this.repeats[this.pendingFrom + this.pending.length] = 1;
      this.repeated = true;
      this.pending.push('');
    } else {
      this.last = s;
      this.pending.push(s);
    }
    if (this.pending.length === UTF8_CHUNK) this.encode();
  }

  /** Appends rows [from, to) of an encoded column as rows starting at `row`. */
  appendEncoded(src: Utf8Data, from: number, to: number, row: number): void {
    this.encode();
    // The slice's first non-null row may repeat a value from before the slice: it gets the bytes.
    let first = from;
    while (first < to && src.valid !== null && src.valid[first] !== 1) first++;
    const lead = first < to && src.repeats?.[first] === 1 ? repeatedSpan(src, first) : null;
    const leadBytes = lead === null ? 0 : lead[1] - lead[0];
    const start = src.offsets[from]!;
    const cut = src.offsets[first]!;
    const end = src.offsets[to]!;
    this.reserve(leadBytes + end - start);
    const at = this.used;
    this.bytes.set(src.bytes.subarray(start, cut), at);
    if (lead !== null) this.bytes.set(src.bytes.subarray(lead[0], lead[1]), at + cut - start);
    this.bytes.set(src.bytes.subarray(cut, end), at + cut - start + leadBytes);
    const shift = at - start;
    for (let i = from; i < first; i++) this.offsets[row + 1 + i - from] = src.offsets[i + 1]! + shift;
    for (let i = first; i < to; i++)
      this.offsets[row + 1 + i - from] = src.offsets[i + 1]! + shift + leadBytes;
    if (src.repeats) {
      this.repeats.set(src.repeats.subarray(from, to), row);
      if (lead !== null) this.repeats[row + first - from] = 0;
      this.repeated = true;
    }
    this.used = at + end - start + leadBytes;
    this.pendingFrom = row + (to - from);
    this.last = null;
  }

  /** Forgets every row and keeps the buffers (a builder reused per request). */
  clear(rows: number): void {
    this.used = 0;
    this.pending = [];
    this.pendingFrom = 0;
    this.last = null;
    this.repeats.fill(0, 0, rows);
    this.repeated = false;
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
    // Offsets are int32, as in Arrow's Utf8 type.
    if (this.used + bytes > 0x7fffffff) throw new RangeError('string column exceeds 2 GiB in one batch');
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

  /** The first `rows` rows into a packed batch. */
  packInto(p: Packer, rows: number, valid: Uint8Array | null): void {
    this.encode();
    p.utf8(rows, this.bytes, this.offsets, valid, this.repeated ? this.repeats : null);
  }

  encoded(rows: number): { bytes: Uint8Array; offsets: Int32Array; repeats: Uint8Array } {
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

/** A list column's elements as rows arrive: one growing typed array and the rows' offsets. */
class ListColumn {
  private items: BigInt64Array | Float64Array;
  private offsets: Int32Array;
  private used = 0;

  constructor(kind: 'list_long' | 'list_double', rows: number) {
    // An element a row to start with, as a numeric column has; it doubles when it fills.
    this.items = kind === 'list_long' ? new BigInt64Array(rows) : new Float64Array(rows);
    this.offsets = new Int32Array(rows + 1);
  }

  /** Row `row`'s elements (none for a null row): a typed array of the column's type, or an array. */
  push(row: number, v: ArrayLike<bigint | number> | null): void {
    if (v !== null) {
      this.reserve(v.length);
      (this.items as Float64Array).set(v as ArrayLike<number>, this.used);
      this.used += v.length;
    }
    this.offsets[row + 1] = this.used;
  }

  /** Appends rows [from, to) of a list column as rows starting at `row`. */
  append(src: ListData, from: number, to: number, row: number): void {
    const start = src.offsets[from]!;
    const end = src.offsets[to]!;
    this.reserve(end - start);
    (this.items as Float64Array).set(src.items.subarray(start, end) as Float64Array, this.used);
    const shift = this.used - start;
    for (let i = from; i < to; i++) this.offsets[row + 1 + i - from] = src.offsets[i + 1]! + shift;
    this.used += end - start;
  }

  clear(): void {
    this.used = 0;
  }

  growRows(rows: number): void {
    const offsets = new Int32Array(rows + 1);
    offsets.set(this.offsets);
    this.offsets = offsets;
  }

  private reserve(n: number): void {
    if (this.used + n <= this.items.length) return;
    let size = Math.max(16, this.items.length * 2);
    while (size < this.used + n) size *= 2;
    const next = new (this.items.constructor as typeof Float64Array)(size);
    next.set(this.items.subarray(0, this.used) as Float64Array);
    this.items = next;
  }

  /** The first `rows` rows into a packed batch. */
  packInto(p: Packer, kind: ListData['kind'], rows: number, valid: Uint8Array | null): void {
    p.list(kind, rows, this.items, this.offsets, valid);
  }

  /** Views of the first `rows` rows (the builder starts new arrays for its next batch). */
  encoded(rows: number): { items: BigInt64Array | Float64Array; offsets: Int32Array } {
    return { items: this.items.subarray(0, this.used), offsets: this.offsets.subarray(0, rows + 1) };
  }
}

type Growable = {
  def: ColumnDef;
  kind: ColumnKind;
  // Typed storage for numeric kinds, an array for the others.
  typed: BigInt64Array | Int32Array | Float64Array | Uint8Array | null;
  /** String columns. */
  utf8: Utf8Column | null;
  valid: Uint8Array;
  list: ListColumn | null;
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
      const list =
        kind === 'list_long' || kind === 'list_double' ? new ListColumn(kind, this.capacity) : null;
      return { def, kind, typed, utf8, list, valid: new Uint8Array(this.capacity), nulls: 0 };
    });
  }

  private grow(): void {
    const next = this.capacity * 2;
    for (const c of this.cols) {
      c.utf8?.growRows(next);
      c.list?.growRows(next);
      if (c.typed) {
        const typed = allocTyped(c.kind, next)!;
        (typed as Uint8Array).set(c.typed as Uint8Array);
        c.typed = typed;
      }
      const valid = new Uint8Array(next);
      valid.set(c.valid);
      c.valid = valid;
    }
    this.capacity = next;
  }

  push(row: Row): void {
    this.pushValues(this.cols.map((c) => row[c.def.name]));
  }

  /** Forgets every row but keeps the buffers, for a builder that makes many small batches. */
  clear(): void {
    for (const c of this.cols) {
      c.utf8?.clear(this.length);
      c.list?.clear();
      c.valid.fill(0, 0, this.length);
      c.nulls = 0;
    }
    this.length = 0;
  }

  /** Appends rows [from, to) of a batch of the same schema (the server's decoded requests). */
  appendBatch(batch: ColumnBatch, from = 0, to = batch.numRows): void {
    const n = to - from;
    if (n <= 0) return;
    while (this.length + n > this.capacity) this.grow();
    const at = this.length;
    for (const c of this.cols) {
      const src = batch.columns[c.def.name];
      if (!src) throw new TypeError(`batch has no column ${c.def.name}`);
      if (src.kind === 'string') {
        for (let i = from; i < to; i++) {
          const v = src.values[i] ?? null;
          if (v === null) c.nulls++;
          c.utf8!.push(v);
          if (v !== null) c.valid[at + i - from] = 1;
        }
        continue;
      }
      if (src.valid) {
        const valid = src.valid.subarray(from, to);
        c.valid.set(valid, at);
        for (let i = 0; i < n; i++) c.nulls += 1 - valid[i]!;
      } else c.valid.fill(1, at, at + n);
      if (src.kind === 'utf8') c.utf8!.appendEncoded(src, from, to, at);
      else if (src.kind === 'list_long' || src.kind === 'list_double') c.list!.append(src, from, to, at);
      else (c.typed as Uint8Array).set((src.values as Uint8Array).subarray(from, to), at);
    }
    this.length += n;
  }

  /** Appends one row given as values in schema column order, from `values[at]` (the ingest path). */
  pushValues(values: readonly unknown[], at = 0): void {
    if (this.length === this.capacity) this.grow();
    const i = this.length++;
    const cols = this.cols;
    for (let j = 0; j < cols.length; j++) {
      const c = cols[j]!;
      const v = values[at + j];
      if (c.utf8) {
        if (v === null || v === undefined) {
          c.utf8.push(null);
          c.nulls++;
        } else {
          c.utf8.push(v as string);
          c.valid[i] = 1;
        }
        continue;
      }
      if (c.list) {
        if (v === null || v === undefined) {
          c.list.push(i, null);
          c.nulls++;
        } else {
          c.list.push(i, v as ArrayLike<bigint | number>);
          c.valid[i] = 1;
        }
        continue;
      }
      if (v === null || v === undefined) {
        c.nulls++;
        continue;
      }
      c.valid[i] = 1;
      if (c.kind === 'boolean') (c.typed as Uint8Array)[i] = v ? 1 : 0;
      else (c.typed as Float64Array)[i] = v as number; // bigint into BigInt64Array, number otherwise
    }
  }

  /** Hands the rows over as a batch and starts a new one. */
  finish(): ColumnBatch {
    const batch = this.view();
    this.reset();
    return batch;
  }

  /**
   * The rows so far packed into one buffer, as `packBatch(this.view())` gives them but without a
   * view per array (a request's batch has 23-37 columns).
   */
  pack(): PackedBatch {
    const n = this.length;
    const p = new Packer(this.cols.length);
    for (const c of this.cols) {
      const valid = c.nulls === 0 ? null : c.valid;
      if (c.utf8) c.utf8.packInto(p, n, valid);
      else if (c.list) c.list.packInto(p, c.kind as ListData['kind'], n, valid);
      else p.values(c.kind as Parameters<Packer['values']>[0], n, c.typed!, valid);
    }
    return p.finish(n);
  }

  /** The rows so far as views of the builder's buffers: valid until the builder next changes. */
  view(): ColumnBatch {
    const n = this.length;
    const columns: Record<string, ColumnData> = {};
    for (const c of this.cols) {
      const valid = c.nulls === 0 ? null : c.valid.subarray(0, n);
      if (c.utf8) columns[c.def.name] = { kind: 'utf8', ...c.utf8.encoded(n), valid };
      else if (c.list) columns[c.def.name] = { kind: c.kind, ...c.list.encoded(n), valid } as ColumnData;
      else columns[c.def.name] = { kind: c.kind, values: c.typed!.subarray(0, n), valid } as ColumnData;
    }
    return { numRows: n, columns };
  }
}

/** Builds a batch from rows in one call (tests, small writes). */
export function batchFromRows(schema: TableSchema, rows: readonly Row[]): ColumnBatch {
  const b = new BatchBuilder(schema, rows.length);
  for (const r of rows) b.push(r);
  return b.view();
}
