// The pieces of a Parquet file both of the engine's writers use (parquet-writer.ts for data files,
// checkpoint-writer.ts for checkpoints; parquet-concat.ts ends its joined files with them too):
// parquet.thrift's numbers, thrift fields, a growable byte buffer, run-length-encoded levels and
// dictionary indexes, packed booleans, compressed data and dictionary pages, column chunks, row
// groups and the end of a file.

import { constants, createZstdCompress, zstdCompressSync } from 'node:zlib';
import { KeptZlibStream, MAX_OUTPUT_BYTES } from '../storage/kept-zlib.ts';
import { VERSION } from '../version.ts';
import { MAGIC } from './parquet-format.ts';
import {
  encodeStruct,
  T_BINARY,
  T_I16,
  T_I32,
  T_I64,
  T_LIST,
  T_STRUCT,
  type TField,
  type TStruct,
} from './thrift.ts';

// parquet.thrift enums
export const TYPE = { BOOLEAN: 0, INT32: 1, INT64: 2, DOUBLE: 5, BYTE_ARRAY: 6 } as const;
export const REQUIRED = 0;
export const OPTIONAL = 1;
export const REPEATED = 2;
export const CONVERTED_UTF8 = 0;
export const CONVERTED_MAP = 1;
export const CONVERTED_LIST = 3;
export const ENCODING_PLAIN = 0;
export const ENCODING_RLE = 3;
export const ENCODING_RLE_DICTIONARY = 8;
export const CODEC_ZSTD = 6;
export const DATA_PAGE = 0;
export const DICTIONARY_PAGE = 2;

/** How the files of this engine name it (FileMetaData.created_by); parquet-concat.ts looks for it. */
export const WRITER_CREATED_BY = 'otelake version ';

// --- thrift helpers --------------------------------------------------------------------------

export const i32 = (id: number, value: number): TField => ({ id, type: T_I32, value });
export const i64 = (id: number, value: number | bigint): TField => ({ id, type: T_I64, value });
export const bin = (id: number, value: Uint8Array | string): TField => ({
  id,
  type: T_BINARY,
  value: typeof value === 'string' ? Buffer.from(value) : value,
});
export const struct = (id: number, value: TStruct): TField => ({ id, type: T_STRUCT, value });
export const list = (id: number, elemType: number, items: TField['value'][]): TField => ({
  id,
  type: T_LIST,
  value: { elemType, set: false, items },
});

// --- byte buffers ------------------------------------------------------------------------------

/** A growable byte buffer, kept from page to page. */
export class Bytes {
  buf = new Uint8Array(1 << 16);
  view = new DataView(this.buf.buffer);
  pos = 0;

  room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.pos++] = b;
  }

  varint(v: number): void {
    this.room(5);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.pos++] = v;
  }

  u32(v: number): void {
    this.room(4);
    this.view.setUint32(this.pos, v, true);
    this.pos += 4;
  }

  raw(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }
}

/**
 * Levels in the RLE/bit-packed hybrid encoding, as RLE runs only (every value fits a byte here),
 * behind the 4-byte length of a v1 data page.
 */
export class LevelRuns {
  private value = -1;
  private count = 0;
  private readonly out: Bytes;
  private readonly lengthAt: number;

  constructor(out: Bytes) {
    this.out = out;
    out.u32(0);
    this.lengthAt = out.pos;
  }

  push(level: number): void {
    if (level === this.value) this.count++;
    else {
      this.flush();
      this.value = level;
      this.count = 1;
    }
  }

  /** Adds `n` of the same level. */
  pushRun(level: number, n: number): void {
    if (n === 0) return;
    if (level !== this.value) {
      this.flush();
      this.value = level;
      this.count = 0;
    }
    this.count += n;
  }

  end(): void {
    this.flush();
    this.out.view.setUint32(this.lengthAt - 4, this.out.pos - this.lengthAt, true);
  }

  private flush(): void {
    if (this.count === 0) return;
    // A run's length can exceed 2^31 only in theory; varint takes what a page can hold.
    this.out.varint(this.count * 2);
    this.out.byte(this.value);
    this.count = 0;
  }
}

/** Booleans bit-packed, least significant bit first (PLAIN BOOLEAN values). */
export class PackedBits {
  private bits = 0;
  private k = 0;
  private readonly out: Bytes;

  constructor(out: Bytes) {
    this.out = out;
  }

  push(bit: boolean): void {
    if (bit) this.bits |= 1 << this.k;
    if (++this.k === 8) {
      this.out.byte(this.bits);
      this.bits = 0;
      this.k = 0;
    }
  }

  end(): void {
    if (this.k > 0) this.out.byte(this.bits);
  }
}

// --- pages and files -------------------------------------------------------------------------

/**
 * Compresses a data page's bytes and writes its header and body with `write`, whose argument is
 * valid only during the call (the body is a view the next page overwrites); returns the bytes
 * written uncompressed. Its values are PLAIN, or dictionary indexes (RLE_DICTIONARY).
 */
export function writeDataPage(
  page: Uint8Array,
  entries: number,
  zstdLevel: number,
  write: (b: Uint8Array) => void,
  encoding = ENCODING_PLAIN,
): number {
  return writePage(page, zstdLevel, write, [
    i32(1, DATA_PAGE),
    struct(5, [i32(1, entries), i32(2, encoding), i32(3, ENCODING_RLE), i32(4, ENCODING_RLE)]),
  ]);
}

/** A column chunk's dictionary page: its `values` distinct values, PLAIN. As writeDataPage. */
export function writeDictionaryPage(
  page: Uint8Array,
  values: number,
  zstdLevel: number,
  write: (b: Uint8Array) => void,
): number {
  return writePage(page, zstdLevel, write, [
    i32(1, DICTIONARY_PAGE),
    struct(7, [i32(1, values), i32(2, ENCODING_PLAIN)]),
  ]);
}

/**
 * This thread's zstd compressor of each level, kept from page to page: a one-shot
 * zstdCompressSync set up a context per page (30-40 µs), 8-11% of the CPU of writing a file of
 * 9,000 rows and about half of one of 100 (bench/parquet-write.ts). A frame's end leaves the
 * context ready for the next page: the same bytes, checked once against the one-shot call.
 */
const compressors = new Map<number, KeptZlibStream>();
function compressor(level: number): KeptZlibStream {
  let kept = compressors.get(level);
  if (kept === undefined) {
    const options = { params: { [constants.ZSTD_c_compressionLevel]: level } };
    kept = new KeptZlibStream(
      () => createZstdCompress(options),
      constants.ZSTD_e_end,
      (page, limits) => zstdCompressSync(page, { ...options, ...limits }),
      { resetAfterInput: false },
    ).checkedWith(SAMPLE_PAGE);
    compressors.set(level, kept);
  }
  return kept;
}

/** Bytes that compress, for the check: 4 KiB of counting. */
const SAMPLE_PAGE = Uint8Array.from({ length: 4096 }, (_, i) => (i * 7 + (i >> 5)) & 0xff);

/** ZSTD_COMPRESSBOUND: the most zstd makes of `n` bytes, so a page compresses in one call. */
const zstdBound = (n: number) => n + (n >> 8) + (n < 128 << 10 ? ((128 << 10) - n) >> 11 : 0);

/** `header` holds the page's type (field 1) and its kind's header (5 or 7); the sizes go between. */
function writePage(
  page: Uint8Array,
  zstdLevel: number,
  write: (b: Uint8Array) => void,
  header: TStruct,
): number {
  const body = compressor(zstdLevel).transform(page, zstdBound(page.length), MAX_OUTPUT_BYTES);
  const head = encodeStruct([header[0]!, i32(2, page.length), i32(3, body.length), header[1]!]);
  write(head);
  write(body);
  return head.length + page.length;
}

/**
 * Dictionary indexes in the RLE/bit-packed hybrid encoding of a data page's values: their bit
 * width in a byte, then RLE runs only (rows of a resource or scope repeat one index), each index
 * in the bytes its width takes. Adjacent runs of one index are joined.
 */
export class IndexRuns {
  private value = -1;
  private count = 0;
  private readonly out: Bytes;
  private readonly width: number;

  constructor(out: Bytes, dictionarySize: number) {
    this.out = out;
    const bits = Math.max(1, 32 - Math.clz32(Math.max(0, dictionarySize - 1)));
    this.width = (bits + 7) >> 3;
    out.byte(bits);
  }

  /** Adds `n` rows of `index`. */
  push(index: number, n: number): void {
    if (index !== this.value) {
      this.flush();
      this.value = index;
    }
    this.count += n;
  }

  end(): void {
    this.flush();
  }

  private flush(): void {
    if (this.count === 0) return;
    const out = this.out;
    out.varint(this.count * 2);
    out.room(this.width);
    for (let k = 0, v = this.value; k < this.width; k++, v >>>= 8) out.buf[out.pos++] = v & 0xff;
    this.count = 0;
  }
}

/** A column chunk in the file at [start, end): its PLAIN/RLE pages, zstd, and their counts. */
export interface ChunkPlace {
  type: number;
  path: readonly string[];
  /** Level entries of its pages. */
  entries: number;
  /** Uncompressed bytes of its pages, headers included. */
  uncompressed: number;
  start: number;
  end: number;
  /** Where its first data page starts, after a dictionary page at `start`; absent: no dictionary. */
  dataStart?: number;
}

/** ColumnChunk of a chunk written with writeDataPage (and writeDictionaryPage), with optional Statistics. */
export function columnChunk(c: ChunkPlace, statistics: TStruct | null = null): TStruct {
  const dictionary = c.dataStart !== undefined;
  const meta: TStruct = [
    i32(1, c.type),
    list(
      2,
      T_I32,
      dictionary ? [ENCODING_PLAIN, ENCODING_RLE, ENCODING_RLE_DICTIONARY] : [ENCODING_PLAIN, ENCODING_RLE],
    ),
    list(
      3,
      T_BINARY,
      c.path.map((p) => Buffer.from(p)),
    ),
    i32(4, CODEC_ZSTD),
    i64(5, c.entries),
    i64(6, c.uncompressed),
    i64(7, c.end - c.start),
    i64(9, c.dataStart ?? c.start),
  ];
  if (dictionary) meta.push(i64(11, c.start));
  if (statistics) meta.push(struct(12, statistics));
  return [i64(2, c.start), struct(3, meta)];
}

/** RowGroup of `rows` rows whose chunks lie at [start, end) of the file. */
export function rowGroup(
  chunks: TStruct[],
  o: { uncompressed: number; rows: number; start: number; end: number; ordinal: number },
): TStruct {
  return [
    list(1, T_STRUCT, chunks),
    i64(2, o.uncompressed),
    i64(3, o.rows),
    i64(5, o.start),
    i64(6, o.end - o.start),
    { id: 7, type: T_I16, value: o.ordinal },
  ];
}

/** A FileMetaData as a file ends: its bytes, their length (u32 LE), "PAR1". */
export function footerBytes(meta: TStruct): Uint8Array[] {
  const footer = encodeStruct(meta);
  const tail = Buffer.alloc(8);
  tail.writeUInt32LE(footer.length, 0);
  MAGIC.copy(tail, 4);
  return [footer, tail];
}

/** The end of a file: FileMetaData (version 1, type-defined column orders), its length, "PAR1". */
export function fileEnd(schema: TStruct[], rows: number, rowGroups: TStruct[], leaves: number): Uint8Array[] {
  return footerBytes([
    i32(1, 1),
    list(2, T_STRUCT, schema),
    i64(3, rows),
    list(4, T_STRUCT, rowGroups),
    bin(6, `${WRITER_CREATED_BY}${VERSION}`),
    list(
      7,
      T_STRUCT,
      Array.from({ length: leaves }, () => [struct(1, [])]), // TypeDefinedOrder
    ),
  ]);
}
