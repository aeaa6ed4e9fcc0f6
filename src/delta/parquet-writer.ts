// Writes a ColumnBatch as a Parquet file, straight from its buffers: each column chunk is encoded
// page by page (levels run-length encoded, values PLAIN, or a dictionary and its indexes for the
// strings of an enclosing message), compressed with node's zstd and written before the next is
// made. Polars wrote these files before, through an Arrow stream and a frame
// (three copies of the rows) on streaming threads whose malloc arenas stayed at 56-63 MiB each;
// this holds the batch and one page. Polars still rewrites files for the seal's OPTIMIZE (its
// dictionaries make a sealed day ~13% smaller) and files it wrote (src/delta/README.md).
//
// The schema is the one polars wrote (every column optional, lists as
// `optional group (LIST) { repeated group list { optional element } }`), so that files of both
// writers read alike and in-day compaction can copy their row groups into one file.

import { closeSync, openSync, writeSync } from 'node:fs';
import type { ColumnDef } from '../schema/tables.ts';
import {
  type ColumnBatch,
  type ColumnData,
  int64Extremes,
  repeatedSpan,
  type Utf8Data,
  utf8Of,
} from './batch.ts';
import {
  Bytes,
  bin,
  CONVERTED_LIST,
  CONVERTED_UTF8,
  columnChunk,
  ENCODING_RLE_DICTIONARY,
  fileEnd,
  IndexRuns,
  i32,
  i64,
  LevelRuns,
  OPTIONAL,
  PackedBits,
  REPEATED,
  rowGroup,
  struct,
  TYPE,
  writeDataPage,
  writeDictionaryPage,
} from './parquet-encoding.ts';
import { MAGIC } from './parquet-format.ts';
import { T_BOOL_TRUE, type TStruct } from './thrift.ts';

/** A page holds at most this many uncompressed bytes of values (readers expect pages of ~1 MiB). */
const PAGE_BYTES = 1 << 20;

export interface ParquetWriteOptions {
  zstdLevel: number;
  rowGroupSize: number;
}

// --- the schema --------------------------------------------------------------------------------

function physicalType(def: ColumnDef): number {
  const t = typeof def.type === 'string' ? def.type : def.type.list;
  switch (t) {
    case 'string':
      return TYPE.BYTE_ARRAY;
    case 'integer':
      return TYPE.INT32;
    case 'double':
      return TYPE.DOUBLE;
    case 'boolean':
      return TYPE.BOOLEAN;
    default:
      return TYPE.INT64; // long, timestamp
  }
}

/** SchemaElements of a column: one leaf, or the three levels of a list. */
function schemaElements(def: ColumnDef): TStruct[] {
  const type = physicalType(def);
  if (typeof def.type !== 'string') {
    return [
      [
        i32(3, OPTIONAL),
        bin(4, def.name),
        i32(5, 1),
        i32(6, CONVERTED_LIST),
        struct(10, [struct(3, [])]), // LogicalType.LIST
      ],
      [i32(3, REPEATED), bin(4, 'list'), i32(5, 1)],
      [i32(1, type), i32(3, OPTIONAL), bin(4, 'element')],
    ];
  }
  const leaf: TStruct = [i32(1, type), i32(3, OPTIONAL), bin(4, def.name)];
  if (def.type === 'string') leaf.push(i32(6, CONVERTED_UTF8), struct(10, [struct(1, [])])); // STRING
  if (def.type === 'timestamp') {
    // TIMESTAMP(isAdjustedToUTC = true, unit = MICROS)
    leaf.push(struct(10, [struct(8, [{ id: 1, type: T_BOOL_TRUE, value: 1 }, struct(2, [struct(2, [])])])]));
  }
  return [leaf];
}

function pathInSchema(def: ColumnDef): string[] {
  return typeof def.type === 'string' ? [def.name] : [def.name, 'list', 'element'];
}

// --- column chunks ---------------------------------------------------------------------------

/** One column's data in a writer-friendly form (a `string` column encoded to UTF-8 first). */
type Encodable = Exclude<ColumnData, { kind: 'string' }>;
type ListData = Extract<ColumnData, { kind: 'list_long' | 'list_double' }>;

const isList = (col: Encodable): col is ListData => col.kind === 'list_long' || col.kind === 'list_double';

interface ChunkStats {
  nulls: number;
  min: Uint8Array | null;
  max: Uint8Array | null;
}

/** Byte range of each non-null row in [from, to) of a utf8 column: its own, or the one it repeats. */
function utf8Spans(col: Utf8Data, from: number, to: number, emit: (a: number, b: number) => void): void {
  const { offsets, valid, repeats } = col;
  let a = 0;
  let b = 0;
  let held = false; // a and b hold the value a repeat row repeats
  for (let i = from; i < to; i++) {
    if (valid !== null && valid[i] !== 1) continue;
    if (repeats?.[i] !== 1) {
      a = offsets[i]!;
      b = offsets[i + 1]!;
      held = true;
    } else if (!held) {
      // A page's first value repeats one from before the page.
      [a, b] = repeatedSpan(col, i);
      held = true;
    }
    emit(a, b);
  }
}

/** Values shorter than this are copied by a loop: Buffer#copy costs ~100 ns a call, a loop ~3 ns a byte. */
const SHORT_VALUE = 32;

/** The definition levels of rows [from, to) of a flat column (1 valid, 0 null), nulls counted. */
function definitionLevels(
  valid: Uint8Array | null,
  from: number,
  to: number,
  out: Bytes,
  stats: ChunkStats,
): void {
  const levels = new LevelRuns(out);
  if (valid === null) levels.pushRun(1, to - from);
  else {
    for (let i = from; i < to; i++) {
      levels.push(valid[i] === 1 ? 1 : 0);
      if (valid[i] !== 1) stats.nulls++;
    }
  }
  levels.end();
}

/** Definition levels and PLAIN values of rows [from, to) of a flat column. */
function encodeFlat(col: Encodable, from: number, to: number, out: Bytes, stats: ChunkStats): number {
  const valid = 'valid' in col ? col.valid : null;
  definitionLevels(valid, from, to, out, stats);
  switch (col.kind) {
    case 'utf8': {
      // Copied by Buffer#copy: a view per value (subarray) made ~20 MB of young garbage a file.
      // Below SHORT_VALUE bytes a loop is cheaper than that call (ids, units, severity texts).
      const bytes = col.bytes;
      const src = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      utf8Spans(col, from, to, (a, b) => {
        out.u32(b - a);
        out.room(b - a);
        if (b - a < SHORT_VALUE) {
          const buf = out.buf;
          let p = out.pos;
          for (let k = a; k < b; k++) buf[p++] = bytes[k]!;
          out.pos = p;
        } else out.pos += src.copy(out.buf, out.pos, a, b);
      });
      break;
    }
    case 'boolean': {
      const bits = new PackedBits(out);
      for (let i = from; i < to; i++) if (valid === null || valid[i] === 1) bits.push(col.values[i] === 1);
      bits.end();
      break;
    }
    case 'long':
    case 'timestamp':
    case 'integer':
    case 'double': {
      const width = col.values.BYTES_PER_ELEMENT;
      const bytes = Buffer.from(col.values.buffer, col.values.byteOffset, col.values.byteLength);
      out.room((to - from) * width);
      if (valid === null) out.pos += bytes.copy(out.buf, out.pos, from * width, to * width);
      else {
        // One copy per run of valid rows, not per value: a metric's kind-specific columns are null
        // in runs (a metric's points share its kind), and a Buffer#copy call costs ~100 ns.
        for (let i = from; i < to; ) {
          if (valid[i] !== 1) {
            i++;
            continue;
          }
          const start = i;
          while (i < to && valid[i] === 1) i++;
          out.pos += bytes.copy(out.buf, out.pos, start * width, i * width);
        }
      }
      if (col.kind !== 'double') rangeStats(col.values, valid, from, to, stats);
      break;
    }
    default:
      throw new Error(`not a flat column: ${col.kind}`);
  }
  return to - from;
}

/** Folds the min and max of the valid values in [from, to) into `stats` (little-endian bytes). */
function rangeStats(
  values: BigInt64Array | Int32Array,
  valid: Uint8Array | null,
  from: number,
  to: number,
  stats: ChunkStats,
): void {
  let min: bigint | number | null = null;
  let max: bigint | number | null = null;
  if (values instanceof BigInt64Array) {
    const rows = int64Extremes(values, valid, from, to);
    if (rows !== null) [min, max] = [values[rows[0]]!, values[rows[1]]!];
  } else {
    for (let i = from; i < to; i++) {
      if (valid !== null && valid[i] !== 1) continue;
      const v = values[i]!;
      if (min === null || v < min) min = v;
      if (max === null || v > max) max = v;
    }
  }
  if (min === null || max === null) return;
  const enc = (v: bigint | number): Uint8Array => {
    const b = Buffer.alloc(values.BYTES_PER_ELEMENT);
    if (typeof v === 'bigint') b.writeBigInt64LE(v);
    else b.writeInt32LE(v);
    return b;
  };
  const dec = (b: Uint8Array): bigint | number =>
    typeof min === 'bigint' ? Buffer.from(b).readBigInt64LE() : Buffer.from(b).readInt32LE();
  if (stats.min === null || min < dec(stats.min)) stats.min = enc(min);
  if (stats.max === null || max > dec(stats.max)) stats.max = enc(max);
}

/**
 * Repetition and definition levels and PLAIN element values of rows [from, to) of a list column:
 * a null list is defined to 0, an empty one to 1, an element to 3 (the element is optional in the
 * schema, never null here). Returns the number of level entries.
 */
function encodeList(col: ListData, from: number, to: number, out: Bytes, stats: ChunkStats): number {
  const { offsets, valid, items } = col;
  let entries = 0;
  const reps = new LevelRuns(out);
  for (let i = from; i < to; i++) {
    const n = offsets[i + 1]! - offsets[i]!;
    reps.push(0);
    reps.pushRun(1, Math.max(0, n - 1));
    entries += Math.max(1, n);
  }
  reps.end();
  const defs = new LevelRuns(out);
  for (let i = from; i < to; i++) {
    const n = offsets[i + 1]! - offsets[i]!;
    if (valid !== null && valid[i] !== 1) {
      defs.push(0);
      stats.nulls++;
    } else if (n === 0) defs.push(1);
    else defs.pushRun(3, n);
  }
  defs.end();
  // A null row holds no elements: the rows' elements are one run.
  const elements = items.subarray(offsets[from]!, offsets[to]!);
  if (elements.length > 0) out.raw(new Uint8Array(elements.buffer, elements.byteOffset, elements.byteLength));
  return entries;
}

/** Rough uncompressed bytes of a row in [from, to) of this column, to size pages. */
function rowBytes(col: Encodable, from: number, to: number): number {
  switch (col.kind) {
    case 'utf8':
      // Repeat rows store no bytes of their own: an underestimate where they are many.
      return (col.offsets[to]! - col.offsets[from]!) / (to - from) + 4;
    case 'list_long':
    case 'list_double':
      return ((col.offsets[to]! - col.offsets[from]!) * 8) / (to - from) + 2;
    default:
      return 8;
  }
}

/** Bytes gathered before a write to the file (a file of 9,000 log records is ~60 KB). */
const WRITE_BYTES = 1 << 20;

/**
 * The file being written, through a buffer: a system call for each page and for each page's
 * header (~60 a file of log records) took 3-9% of the CPU of writing a file of 100 rows.
 */
class FileOut {
  /** Bytes written so far, those still in the buffer included. */
  pos = 0;
  readonly fd: number;
  constructor(fd: number) {
    this.fd = fd;
    pending.pos = 0;
  }
  write(b: Uint8Array): void {
    if (pending.pos + b.length > WRITE_BYTES) this.flush();
    if (b.length > WRITE_BYTES) this.writeAll(b);
    else pending.raw(b);
    this.pos += b.length;
  }
  flush(): void {
    this.writeAll(pending.bytes());
    pending.pos = 0;
  }
  private writeAll(b: Uint8Array): void {
    let done = 0;
    while (done < b.length) done += writeSync(this.fd, b, done, b.length - done);
  }
}

const page = new Bytes();
const dictionary = new Bytes();
/** FileOut's buffer, kept from file to file. */
const pending = new Bytes();
/** Runs of one dictionary index: the index and its rows. */
let runIndex = new Int32Array(1024);
let runRows = new Int32Array(1024);

/**
 * Rows [from, to) of a column whose values repeat down runs of rows (ColumnDef.enclosing) as a
 * dictionary page of its distinct values and one data page of their indexes, in RLE runs: a
 * resource's attributes, ~280-340 bytes a row in the bench, were otherwise copied and compressed
 * for every row, 36-46% of a data file's uncompressed bytes. A repeat row (batch.ts) is its run's
 * index without a look at its value. Returns the dictionary's size.
 */
function encodeDictionary(col: Utf8Data, from: number, to: number, stats: ChunkStats): number {
  const { valid, repeats, offsets } = col;
  const src = Buffer.from(col.bytes.buffer, col.bytes.byteOffset, col.bytes.byteLength);
  if (runIndex.length < to - from) {
    runIndex = new Int32Array(to - from);
    runRows = new Int32Array(to - from);
  }
  const known = new Map<string, number>();
  dictionary.pos = 0;
  page.pos = 0;
  definitionLevels(valid, from, to, page, stats);
  let runs = 0;
  let index = -1;
  for (let i = from; i < to; i++) {
    if (valid !== null && valid[i] !== 1) continue;
    if (index < 0 || repeats?.[i] !== 1) {
      // A range's first value may repeat one from before it.
      const [a, b] = repeats?.[i] === 1 ? repeatedSpan(col, i) : [offsets[i]!, offsets[i + 1]!];
      const value = src.toString('latin1', a, b); // one string per byte sequence
      let k = known.get(value);
      if (k === undefined) {
        k = known.size;
        known.set(value, k);
        dictionary.u32(b - a);
        dictionary.room(b - a);
        dictionary.pos += src.copy(dictionary.buf, dictionary.pos, a, b);
      }
      if (k !== index) {
        runIndex[runs] = index = k;
        runRows[runs++] = 0;
      }
    }
    runRows[runs - 1]!++;
  }
  const indexes = new IndexRuns(page, known.size);
  for (let r = 0; r < runs; r++) indexes.push(runIndex[r]!, runRows[r]!);
  indexes.end();
  return known.size;
}

/** Writes rows [from, to) of a column as one chunk; returns its ColumnChunk and uncompressed size. */
function writeColumnChunk(
  out: FileOut,
  def: ColumnDef,
  col: Encodable,
  from: number,
  to: number,
  zstdLevel: number,
): { chunk: TStruct; uncompressed: number } {
  const start = out.pos;
  const stats: ChunkStats = { nulls: 0, min: null, max: null };
  const write = (bytes: Uint8Array) => out.write(bytes);
  if (def.enclosing && col.kind === 'utf8') {
    const size = encodeDictionary(col, from, to, stats);
    let uncompressed = writeDictionaryPage(dictionary.bytes(), size, zstdLevel, write);
    const dataStart = out.pos;
    uncompressed += writeDataPage(page.bytes(), to - from, zstdLevel, write, ENCODING_RLE_DICTIONARY);
    const place = {
      type: TYPE.BYTE_ARRAY,
      path: pathInSchema(def),
      entries: to - from,
      uncompressed,
      start,
      end: out.pos,
      dataStart,
    };
    return { chunk: columnChunk(place, [i64(3, stats.nulls)]), uncompressed };
  }
  const perPage = Math.max(1, Math.floor(PAGE_BYTES / rowBytes(col, from, to)));
  let entries = 0;
  let uncompressed = 0;
  for (let a = from; a < to; a += perPage) {
    const b = Math.min(to, a + perPage);
    page.pos = 0;
    const n = isList(col) ? encodeList(col, a, b, page, stats) : encodeFlat(col, a, b, page, stats);
    entries += n;
    uncompressed += writeDataPage(page.bytes(), n, zstdLevel, write);
  }
  // No statistics for lists: a leaf's null count would have to count empty lists too.
  let statistics: TStruct | null = null;
  if (!isList(col)) {
    statistics = [i64(3, stats.nulls)];
    if (stats.max && stats.min) statistics.push(bin(5, stats.max), bin(6, stats.min));
  }
  const place = {
    type: physicalType(def),
    path: pathInSchema(def),
    entries,
    uncompressed,
    start,
    end: out.pos,
  };
  return { chunk: columnChunk(place, statistics), uncompressed };
}

/**
 * Writes `batch` (columns in `columns`' order) to a new file at `path` in row groups of
 * `rowGroupSize` rows. The file is not synced.
 */
export function writeParquetFile(
  path: string,
  columns: readonly ColumnDef[],
  batch: ColumnBatch,
  opts: ParquetWriteOptions,
): void {
  const n = batch.numRows;
  const data: Encodable[] = columns.map((def) => {
    const c = batch.columns[def.name];
    if (!c) throw new Error(`batch has no column ${def.name}`);
    return c.kind === 'string' ? utf8Of(c.values, n) : c;
  });
  const fd = openSync(path, 'wx');
  try {
    const out = new FileOut(fd);
    out.write(MAGIC);
    const rowGroups: TStruct[] = [];
    for (let from = 0, ordinal = 0; from < n; from += opts.rowGroupSize, ordinal++) {
      const to = Math.min(n, from + opts.rowGroupSize);
      const start = out.pos;
      const chunks = columns.map((def, i) => writeColumnChunk(out, def, data[i]!, from, to, opts.zstdLevel));
      const uncompressed = chunks.reduce((sum, c) => sum + c.uncompressed, 0);
      rowGroups.push(
        rowGroup(
          chunks.map((c) => c.chunk),
          { uncompressed, rows: to - from, start, end: out.pos, ordinal },
        ),
      );
    }
    const schema: TStruct[] = [[bin(4, 'root'), i32(5, columns.length)], ...columns.flatMap(schemaElements)];
    for (const bytes of fileEnd(schema, n, rowGroups, columns.length)) out.write(bytes);
    out.flush();
  } finally {
    closeSync(fd);
  }
}
