// Parquet files joined without decoding a page, so that an in-day compaction costs a file copy
// instead of a rewrite (a polars rewrite of 100k span rows took ~1.2 µs of CPU per row: at 100k
// spans/s polars' threads took 18-20% of a core, 9-10% with copies). Two ways:
// - concatParquet copies the inputs' row groups as they are; only the footer is written anew,
//   each input's offsets moved by where its bytes now start.
// - mergeRowGroups joins small row groups of files this engine wrote (parquet-writer.ts) into
//   larger ones, a column chunk being the pages of the inputs' chunks of that column one after
//   another: those pages stand alone (no page index, each starting a row). A dictionary-encoded
//   chunk is the exception: one dictionary of the inputs' distinct values, and their index pages
//   (a few runs each) decoded and written again with the indexes mapped into it.
//
// File layout read and written (Parquet format): "PAR1", the column chunks (with anything a writer
// puts between them), the page indexes (ColumnIndex, OffsetIndex), the FileMetaData footer, its
// length (u32 LE), "PAR1". A file this code does not fully understand (other schema, encryption,
// bloom filters, chunks in other files, a footer that does not encode back to its own bytes) is
// left to the caller, who rewrites the files instead.

import { open, unlink } from 'node:fs/promises';
import { zstdDecompressSync } from 'node:zlib';
import {
  Bytes,
  DATA_PAGE,
  DICTIONARY_PAGE,
  ENCODING_PLAIN,
  ENCODING_RLE_DICTIONARY,
  footerBytes,
  IndexRuns,
  rowGroup,
  TYPE,
  WRITER_CREATED_BY,
  writeDataPage,
  writeDictionaryPage,
} from './parquet-encoding.ts';
import { ParquetFileError, readAt, readFooter } from './parquet-footer.ts';
import {
  CC_COLUMN_INDEX_LENGTH,
  CC_COLUMN_INDEX_OFFSET,
  CC_CRYPTO,
  CC_FILE_OFFSET,
  CC_FILE_PATH,
  CC_META,
  CC_OFFSET_INDEX_LENGTH,
  CC_OFFSET_INDEX_OFFSET,
  CM_BLOOM_OFFSET,
  CM_DATA_PAGE_OFFSET,
  CM_DICTIONARY_PAGE_OFFSET,
  CM_INDEX_PAGE_OFFSET,
  CM_NUM_VALUES,
  CM_STATISTICS,
  CM_TOTAL_COMPRESSED,
  CM_TOTAL_UNCOMPRESSED,
  CM_TYPE,
  FMD_COLUMN_ORDERS,
  FMD_CREATED_BY,
  FMD_ENCRYPTION,
  FMD_KEY_VALUE,
  FMD_NUM_ROWS,
  FMD_ROW_GROUPS,
  FMD_SCHEMA,
  FMD_VERSION,
  MAGIC,
  OI_PAGE_LOCATIONS,
  PH_COMPRESSED_SIZE,
  PH_DATA_HEADER,
  PH_DICTIONARY_HEADER,
  PH_TYPE,
  PL_OFFSET,
  RG_COLUMNS,
  RG_FILE_OFFSET,
  RG_NUM_ROWS,
  RG_ORDINAL,
  ST_MAX_VALUE,
  ST_MIN_VALUE,
  ST_NULL_COUNT,
} from './parquet-format.ts';
import {
  CompactReader,
  decodeStruct,
  encodeStruct,
  field,
  intField,
  setInt,
  structField,
  structItems,
  T_BINARY,
  T_I64,
  T_STRUCT,
  ThriftError,
  type TList,
  type TStruct,
} from './thrift.ts';

/** Why a set of files is not joined here (the caller rewrites them). */
export class NotConcatenable extends Error {}

interface Input {
  path: string;
  meta: TStruct;
  /** The bytes [4, dataEnd) hold every column chunk; page indexes and the footer follow. */
  dataEnd: number;
  /** Each column chunk's page indexes, read from the file: [columnIndex, offsetIndex]. */
  indexes: Map<TStruct, [Uint8Array | null, TStruct | null]>;
}

const rowGroups = (meta: TStruct): TStruct[] => structItems(meta, FMD_ROW_GROUPS);
const chunks = (rowGroup: TStruct): TStruct[] => structItems(rowGroup, RG_COLUMNS);

async function readInput(path: string, minRowGroupRows: number): Promise<Input> {
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    const { meta, bytes: footer, start: footerStart } = await readFooter(fh, size);
    // Every field is kept by re-encoding it: only a footer that encodes back to itself qualifies.
    if (!Buffer.from(encodeStruct(meta)).equals(footer))
      throw new NotConcatenable('footer does not round-trip');
    if (field(meta, FMD_ENCRYPTION)) throw new NotConcatenable('encrypted file');

    let dataEnd = footerStart;
    const ranges: [number, number][] = [];
    for (const rg of rowGroups(meta)) {
      if ((intField(rg, RG_NUM_ROWS) ?? 0) < minRowGroupRows) throw new NotConcatenable('small row group');
      for (const cc of chunks(rg)) {
        if (field(cc, CC_FILE_PATH) || field(cc, CC_CRYPTO))
          throw new NotConcatenable('external or encrypted chunk');
        const m = structField(cc, CC_META);
        if (!m || field(m, CM_BLOOM_OFFSET)) throw new NotConcatenable('bloom filter or no chunk metadata');
        const dict = intField(m, CM_DICTIONARY_PAGE_OFFSET);
        const start = Math.min(
          intField(m, CM_DATA_PAGE_OFFSET) ?? -1,
          dict !== undefined && dict > 0 ? dict : Infinity,
        );
        ranges.push([start, start + (intField(m, CM_TOTAL_COMPRESSED) ?? -1)]);
        for (const id of [CC_COLUMN_INDEX_OFFSET, CC_OFFSET_INDEX_OFFSET]) {
          const at = intField(cc, id);
          if (at !== undefined) dataEnd = Math.min(dataEnd, at);
        }
      }
    }
    for (const [start, end] of ranges) {
      if (!(start >= 4 && end > start && end <= dataEnd))
        throw new NotConcatenable('column chunk outside the data');
    }

    const indexes = new Map<TStruct, [Uint8Array | null, TStruct | null]>();
    for (const rg of rowGroups(meta)) {
      for (const cc of chunks(rg)) {
        const span = (offsetId: number, lengthId: number): [number, number] | null => {
          const at = intField(cc, offsetId);
          const len = intField(cc, lengthId);
          if (at === undefined && len === undefined) return null;
          if (at === undefined || len === undefined || at < dataEnd || at + len > footerStart)
            throw new NotConcatenable('page index outside the index area');
          return [at, len];
        };
        const ci = span(CC_COLUMN_INDEX_OFFSET, CC_COLUMN_INDEX_LENGTH);
        const oi = span(CC_OFFSET_INDEX_OFFSET, CC_OFFSET_INDEX_LENGTH);
        const columnIndex = ci ? await readAt(fh, ci[0], ci[1]) : null;
        let offsetIndex: TStruct | null = null;
        if (oi) {
          const bytes = await readAt(fh, oi[0], oi[1]);
          offsetIndex = decodeStruct(bytes);
          if (!Buffer.from(encodeStruct(offsetIndex)).equals(bytes))
            throw new NotConcatenable('offset index does not round-trip');
          for (const loc of structItems(offsetIndex, OI_PAGE_LOCATIONS)) {
            if (intField(loc, PL_OFFSET) === undefined)
              throw new NotConcatenable('page location without offset');
          }
        }
        indexes.set(cc, [columnIndex, offsetIndex]);
      }
    }
    return { path, meta, dataEnd, indexes };
  } finally {
    await fh.close();
  }
}

/** The footer fields that must be equal for files to share one footer. */
function schemaKey(meta: TStruct): Buffer {
  const kept = meta.filter((f) => [FMD_VERSION, FMD_SCHEMA, FMD_KEY_VALUE, FMD_COLUMN_ORDERS].includes(f.id));
  return Buffer.from(encodeStruct(kept));
}

/** The end of a joined file: the first input's footer with the new rows and row groups, its length, "PAR1". */
function joinedFooter(first: TStruct, rows: number, groups: TStruct[]): Uint8Array[] {
  return footerBytes(
    first.map((f) => {
      if (f.id === FMD_NUM_ROWS) return { ...f, value: rows };
      if (f.id === FMD_ROW_GROUPS) return { ...f, value: { ...(f.value as TList), items: groups } };
      return f;
    }),
  );
}

/** A joined file being written: bytes go to its end. */
interface JoinedOut {
  readonly pos: number;
  write(bytes: Uint8Array): Promise<void>;
}

/**
 * Creates `output` (never replacing a file), writes "PAR1" and lets `fill` write the rest; the
 * file is removed when `fill` throws.
 */
async function createJoined(
  output: string,
  fill: (out: JoinedOut) => Promise<Concatenated>,
): Promise<Concatenated> {
  const fh = await open(output, 'wx');
  let written = false;
  try {
    const out = {
      pos: 0,
      async write(bytes: Uint8Array) {
        await fh.write(bytes, 0, bytes.length, this.pos);
        this.pos += bytes.length;
      },
    };
    await out.write(MAGIC);
    const result = await fill(out);
    written = true;
    return result;
  } finally {
    await fh.close();
    if (!written) await unlink(output).catch(() => {});
  }
}

/** Throws NotConcatenable unless every file has the first one's schema. */
function checkSameSchema(files: readonly Input[]): void {
  const key = schemaKey(files[0]!.meta);
  for (const f of files) if (!schemaKey(f.meta).equals(key)) throw new NotConcatenable('different schemas');
}

/** Moves every data offset of a column chunk (and of its offset index) by `delta`. */
function shiftChunk(cc: TStruct, offsetIndex: TStruct | null, delta: number): void {
  const fileOffset = intField(cc, CC_FILE_OFFSET);
  if (fileOffset !== undefined) setInt(cc, CC_FILE_OFFSET, fileOffset + delta);
  const m = structField(cc, CC_META)!;
  for (const id of [CM_DATA_PAGE_OFFSET, CM_INDEX_PAGE_OFFSET, CM_DICTIONARY_PAGE_OFFSET]) {
    const at = intField(m, id);
    // A dictionary offset of 0 stands for none in some writers: it stays 0.
    if (at !== undefined && at > 0) setInt(m, id, at + delta);
  }
  if (offsetIndex) {
    for (const loc of structItems(offsetIndex, OI_PAGE_LOCATIONS)) {
      setInt(loc, PL_OFFSET, intField(loc, PL_OFFSET)! + delta);
    }
  }
}

export interface Concatenated {
  rows: number;
  rowGroups: number;
}

/**
 * Writes `inputs` as one Parquet file at `output` (created, not replaced), their row groups in
 * order. Throws NotConcatenable (and leaves no output) when the files cannot be joined this way,
 * among others when a row group has fewer than `minRowGroupRows` rows: joined files keep their
 * row groups, and many small ones would make a file slow to read.
 */
export function concatParquet(
  inputs: readonly string[],
  output: string,
  minRowGroupRows: number,
): Promise<Concatenated> {
  return notConcatenableOnBadFile(() => join(inputs, output, minRowGroupRows));
}

/**
 * Writes `inputs`, every one written by parquet-writer.ts, as one Parquet file at `output`
 * (created, not replaced) whose row groups join the inputs' row groups, in order, into groups of
 * up to `rowGroupSize` rows. Throws NotConcatenable (and leaves no output) for any other file.
 */
export function mergeRowGroups(
  inputs: readonly string[],
  output: string,
  rowGroupSize: number,
  zstdLevel: number,
): Promise<Concatenated> {
  return notConcatenableOnBadFile(() => merge(inputs, output, rowGroupSize, zstdLevel));
}

async function notConcatenableOnBadFile(fn: () => Promise<Concatenated>): Promise<Concatenated> {
  try {
    return await fn();
  } catch (err) {
    // A footer field of an unexpected type, wherever it is met: the files are rewritten instead.
    if (err instanceof ThriftError) throw new NotConcatenable(`unreadable footer: ${err.message}`);
    if (err instanceof ParquetFileError) throw new NotConcatenable(err.message);
    throw err;
  }
}

async function join(
  inputs: readonly string[],
  output: string,
  minRowGroupRows: number,
): Promise<Concatenated> {
  const files: Input[] = [];
  for (const path of inputs) files.push(await readInput(path, minRowGroupRows));
  checkSameSchema(files);

  return createJoined(output, async (out) => {
    const groups: TStruct[] = [];
    let rows = 0;
    for (const f of files) {
      const delta = out.pos - 4;
      const fh = await open(f.path, 'r');
      try {
        for (let at = 4; at < f.dataEnd; ) {
          const n = Math.min(f.dataEnd - at, 8 << 20);
          await out.write(await readAt(fh, at, n));
          at += n;
        }
      } finally {
        await fh.close();
      }
      for (const rg of rowGroups(f.meta)) {
        for (const cc of chunks(rg)) shiftChunk(cc, f.indexes.get(cc)![1], delta);
        const first = intField(rg, RG_FILE_OFFSET);
        if (first !== undefined) setInt(rg, RG_FILE_OFFSET, first + delta);
        setInt(rg, RG_ORDINAL, groups.length);
        rows += intField(rg, RG_NUM_ROWS)!;
        groups.push(rg);
      }
    }
    // Page indexes after the data, column indexes first, as writers place them.
    for (const [kind, offsetId, lengthId] of [
      [0, CC_COLUMN_INDEX_OFFSET, CC_COLUMN_INDEX_LENGTH],
      [1, CC_OFFSET_INDEX_OFFSET, CC_OFFSET_INDEX_LENGTH],
    ] as const) {
      for (const f of files) {
        for (const rg of rowGroups(f.meta)) {
          for (const cc of chunks(rg)) {
            const index = f.indexes.get(cc)![kind];
            if (index === null) continue;
            const bytes = index instanceof Uint8Array ? index : encodeStruct(index);
            setInt(cc, offsetId, out.pos);
            setInt(cc, lengthId, bytes.length);
            await out.write(bytes);
          }
        }
      }
    }
    for (const bytes of joinedFooter(files[0]!.meta, rows, groups)) await out.write(bytes);
    return { rows, rowGroups: groups.length };
  });
}

// --- merging row groups ------------------------------------------------------------------------

/** Orders two min/max values of a column of this physical type; null for a type not compared here. */
function comparer(type: number): ((a: Uint8Array, b: Uint8Array) => number) | null {
  const buf = (x: Uint8Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  if (type === TYPE.INT32) return (a, b) => buf(a).readInt32LE() - buf(b).readInt32LE();
  if (type === TYPE.INT64) {
    return (a, b) => {
      const d = buf(a).readBigInt64LE() - buf(b).readBigInt64LE();
      return d < 0n ? -1 : d > 0n ? 1 : 0;
    };
  }
  return null;
}

/** The statistics of chunks joined into one: null counts added, min and max of the mins and maxes. */
function mergedStatistics(metas: readonly TStruct[]): TStruct | null {
  const all = metas.map((m) => structField(m, CM_STATISTICS));
  if (all.some((st) => st === undefined)) return null;
  const stats = all as TStruct[];
  const out: TStruct = [];
  const nulls = stats.map((st) => intField(st, ST_NULL_COUNT));
  if (nulls.every((n) => n !== undefined)) {
    out.push({ id: ST_NULL_COUNT, type: T_I64, value: nulls.reduce((a, b) => a! + b!, 0)! });
  }
  const compare = comparer(intField(metas[0]!, CM_TYPE)!);
  const pick = (id: number, better: (d: number) => boolean): Uint8Array | undefined => {
    let best: Uint8Array | undefined;
    for (const st of stats) {
      const v = field(st, id)?.value as Uint8Array | undefined;
      if (v !== undefined && (best === undefined || better(compare!(v, best)))) best = v;
    }
    return best;
  };
  // Chunks of only nulls have no min or max; the others' give the joined chunk's.
  if (compare) {
    const max = pick(ST_MAX_VALUE, (d) => d > 0);
    const min = pick(ST_MIN_VALUE, (d) => d < 0);
    if (max && min) {
      out.push(
        { id: ST_MAX_VALUE, type: T_BINARY, value: max },
        { id: ST_MIN_VALUE, type: T_BINARY, value: min },
      );
    }
  }
  return out;
}

/** A dictionary-encoded chunk's pages, as parquet-writer.ts writes them: the dictionary first. */
function pagesOf(chunk: Uint8Array): { header: TStruct; body: Uint8Array }[] {
  const pages: { header: TStruct; body: Uint8Array }[] = [];
  for (let pos = 0; pos < chunk.length; ) {
    const r = new CompactReader(chunk, pos);
    const header = r.struct();
    const size = intField(header, PH_COMPRESSED_SIZE) ?? -1;
    if (size < 0 || r.pos + size > chunk.length) throw new NotConcatenable('page outside its chunk');
    pages.push({ header, body: chunk.subarray(r.pos, r.pos + size) });
    pos = r.pos + size;
  }
  return pages;
}

/**
 * Dictionary-encoded chunks of one column joined into one chunk: one dictionary of their distinct
 * values, and each data page again with its indexes mapped into it (RLE runs only, as the writer
 * writes them; their levels as they were). Returns the new chunk's dictionary page, its data pages
 * and their uncompressed size, headers included.
 */
function mergeDictionaryChunks(
  chunks: readonly Uint8Array[],
  zstdLevel: number,
): { dictionary: Uint8Array; data: Uint8Array[]; uncompressed: number } {
  const dictionary = new Bytes();
  const known = new Map<string, number>();
  const inputs = chunks.map((chunk) => {
    const [first, ...data] = pagesOf(chunk);
    const dict = first && structField(first.header, PH_DICTIONARY_HEADER);
    if (!dict || intField(first.header, PH_TYPE) !== DICTIONARY_PAGE || intField(dict, 2) !== ENCODING_PLAIN)
      throw new NotConcatenable('no PLAIN dictionary page first');
    // Each of this chunk's dictionary values, as an index of the joined dictionary.
    const values = zstdDecompressSync(first.body);
    const remap: number[] = [];
    for (let p = 0; p < values.length; ) {
      const n = values.readUInt32LE(p);
      const value = values.toString('latin1', p + 4, p + 4 + n);
      let i = known.get(value);
      if (i === undefined) {
        i = known.size;
        known.set(value, i);
        dictionary.raw(values.subarray(p, p + 4 + n));
      }
      remap.push(i);
      p += 4 + n;
    }
    if (remap.length !== intField(dict, 1)) throw new NotConcatenable('dictionary size');
    return { data, remap };
  });

  const written: Uint8Array[] = [];
  const write = (b: Uint8Array) => written.push(new Uint8Array(b)); // a copy: a page's body is a kept buffer's view
  let uncompressed = writeDictionaryPage(dictionary.bytes(), known.size, zstdLevel, write);
  const dictionaryPage = Buffer.concat(written.splice(0));
  const page = new Bytes();
  for (const { data, remap } of inputs) {
    for (const { header, body } of data) {
      const dataHeader = structField(header, PH_DATA_HEADER);
      if (
        intField(header, PH_TYPE) !== DATA_PAGE ||
        !dataHeader ||
        intField(dataHeader, 2) !== ENCODING_RLE_DICTIONARY
      )
        throw new NotConcatenable('not a page of dictionary indexes');
      page.pos = 0;
      remapIndexPage(zstdDecompressSync(body), remap, known.size, page);
      const entries = intField(dataHeader, 1)!;
      uncompressed += writeDataPage(page.bytes(), entries, zstdLevel, write, ENCODING_RLE_DICTIONARY);
    }
  }
  return { dictionary: dictionaryPage, data: written, uncompressed };
}

/**
 * A data page of dictionary indexes, uncompressed, written to `out` again: its levels as they
 * were, then each RLE run's index mapped by `remap` into a dictionary of `size` values.
 */
function remapIndexPage(bytes: Buffer, remap: readonly number[], size: number, out: Bytes): void {
  const levelsEnd = 4 + bytes.readUInt32LE(0);
  out.raw(bytes.subarray(0, levelsEnd));
  const runs = new IndexRuns(out, size);
  const width = (bytes[levelsEnd]! + 7) >> 3;
  for (let p = levelsEnd + 1; p < bytes.length; ) {
    let head = 0;
    for (let shift = 0; ; shift += 7) {
      const b = bytes[p++]!;
      head += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    if (head % 2 === 1) throw new NotConcatenable('bit-packed indexes');
    let index = 0;
    for (let k = 0; k < width; k++) index += bytes[p++]! * 2 ** (8 * k);
    const to = remap[index];
    if (to === undefined) throw new NotConcatenable('index beyond the dictionary');
    runs.push(to, head / 2);
  }
  runs.end();
}

async function merge(
  inputs: readonly string[],
  output: string,
  rowGroupSize: number,
  zstdLevel: number,
): Promise<Concatenated> {
  const files: Input[] = [];
  for (const path of inputs) {
    const f = await readInput(path, 0);
    const createdBy = Buffer.from((field(f.meta, FMD_CREATED_BY)?.value as Uint8Array) ?? []).toString();
    if (!createdBy.startsWith(WRITER_CREATED_BY))
      throw new NotConcatenable(`written by ${createdBy || 'unknown'}`);
    for (const rg of rowGroups(f.meta)) {
      for (const cc of chunks(rg)) {
        if (f.indexes.get(cc)!.some((x) => x !== null)) throw new NotConcatenable('page index');
      }
    }
    files.push(f);
  }
  checkSameSchema(files);

  // Output row groups: runs of input row groups of up to rowGroupSize rows (at least one each).
  const sources = files.flatMap((f, i) => rowGroups(f.meta).map((rg) => ({ file: i, rg })));
  const plan: (typeof sources)[] = [];
  let rows = 0;
  for (const s of sources) {
    const n = intField(s.rg, RG_NUM_ROWS)!;
    const last = plan.at(-1);
    const lastRows = last?.reduce((t, x) => t + intField(x.rg, RG_NUM_ROWS)!, 0) ?? 0;
    if (last && lastRows + n <= rowGroupSize) last.push(s);
    else plan.push([s]);
    rows += n;
  }

  const handles = await Promise.all(files.map((f) => open(f.path, 'r')));
  try {
    return await createJoined(output, async (out) => {
      const groups: TStruct[] = [];
      const columns = chunks(sources[0]!.rg).length;
      for (const group of plan) {
        const groupStart = out.pos;
        const outChunks: TStruct[] = [];
        let uncompressed = 0;
        for (let c = 0; c < columns; c++) {
          const start = out.pos;
          const metas = group.map((s) => structField(chunks(s.rg)[c]!, CC_META)!);
          let values = 0;
          let chunkUncompressed = 0;
          let dataStart = start;
          const dictionaries = metas.filter((m) => (intField(m, CM_DICTIONARY_PAGE_OFFSET) ?? 0) > 0).length;
          if (dictionaries > 0) {
            if (dictionaries < metas.length) throw new NotConcatenable('a dictionary in some chunks only');
            const read = metas.map((m, k) =>
              readAt(
                handles[group[k]!.file]!,
                intField(m, CM_DICTIONARY_PAGE_OFFSET)!,
                intField(m, CM_TOTAL_COMPRESSED)!,
              ),
            );
            const merged = mergeDictionaryChunks(await Promise.all(read), zstdLevel);
            await out.write(merged.dictionary);
            dataStart = out.pos;
            for (const page of merged.data) await out.write(page);
            chunkUncompressed = merged.uncompressed;
            for (const m of metas) values += intField(m, CM_NUM_VALUES)!;
          } else {
            for (const [k, m] of metas.entries()) {
              const at = intField(m, CM_DATA_PAGE_OFFSET)!;
              await out.write(await readAt(handles[group[k]!.file]!, at, intField(m, CM_TOTAL_COMPRESSED)!));
              values += intField(m, CM_NUM_VALUES)!;
              chunkUncompressed += intField(m, CM_TOTAL_UNCOMPRESSED)!;
            }
          }
          const stats = mergedStatistics(metas);
          const meta: TStruct = metas[0]!
            .filter((f) => f.id < CM_NUM_VALUES) // type, encodings, path, codec
            .concat([
              { id: CM_NUM_VALUES, type: T_I64, value: values },
              { id: CM_TOTAL_UNCOMPRESSED, type: T_I64, value: chunkUncompressed },
              { id: CM_TOTAL_COMPRESSED, type: T_I64, value: out.pos - start },
              { id: CM_DATA_PAGE_OFFSET, type: T_I64, value: dataStart },
            ]);
          if (dictionaries > 0) meta.push({ id: CM_DICTIONARY_PAGE_OFFSET, type: T_I64, value: start });
          if (stats) meta.push({ id: CM_STATISTICS, type: T_STRUCT, value: stats });
          outChunks.push([
            { id: CC_FILE_OFFSET, type: T_I64, value: start },
            { id: CC_META, type: T_STRUCT, value: meta },
          ]);
          uncompressed += chunkUncompressed;
        }
        const groupRows = group.reduce((t, x) => t + intField(x.rg, RG_NUM_ROWS)!, 0);
        const place = {
          uncompressed,
          rows: groupRows,
          start: groupStart,
          end: out.pos,
          ordinal: groups.length,
        };
        groups.push(rowGroup(outChunks, place));
      }
      for (const bytes of joinedFooter(files[0]!.meta, rows, groups)) await out.write(bytes);
      return { rows, rowGroups: groups.length };
    });
  } finally {
    await Promise.all(handles.map((h) => h.close()));
  }
}
