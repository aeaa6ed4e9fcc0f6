// Parquet files joined by copying their row groups as they are: no page is decoded or compressed
// again, so an in-day compaction costs a file copy instead of a rewrite (a polars rewrite of 100k
// span rows took ~1.2 µs of CPU per row: at 100k spans/s polars' threads took 18-20% of a core,
// 9-10% with copies). Only the footer is written anew: the inputs' row groups in order, each
// input's offsets moved by where its bytes now start.
//
// File layout read and written (Parquet format): "PAR1", the column chunks (with anything a writer
// puts between them), the page indexes (ColumnIndex, OffsetIndex), the FileMetaData footer, its
// length (u32 LE), "PAR1". A file this code does not fully understand (other schema, encryption,
// bloom filters, chunks in other files, a footer that does not encode back to its own bytes) is
// left to the caller, who rewrites the files instead.

import { open, unlink } from 'node:fs/promises';
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
  CM_TOTAL_COMPRESSED,
  FMD_COLUMN_ORDERS,
  FMD_ENCRYPTION,
  FMD_KEY_VALUE,
  FMD_NUM_ROWS,
  FMD_ROW_GROUPS,
  FMD_SCHEMA,
  FMD_VERSION,
  MAGIC,
  OI_PAGE_LOCATIONS,
  PL_OFFSET,
  RG_COLUMNS,
  RG_FILE_OFFSET,
  RG_NUM_ROWS,
  RG_ORDINAL,
} from './parquet-format.ts';
import {
  decodeStruct,
  encodeStruct,
  field,
  intField,
  setInt,
  structField,
  structItems,
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
export async function concatParquet(
  inputs: readonly string[],
  output: string,
  minRowGroupRows: number,
): Promise<Concatenated> {
  try {
    return await join(inputs, output, minRowGroupRows);
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
  const key = schemaKey(files[0]!.meta);
  for (const f of files) if (!schemaKey(f.meta).equals(key)) throw new NotConcatenable('different schemas');

  const out = await open(output, 'wx');
  let written = false;
  try {
    let pos = 0;
    const write = async (b: Uint8Array) => {
      await out.write(b, 0, b.length, pos);
      pos += b.length;
    };
    await write(MAGIC);
    const groups: TStruct[] = [];
    let rows = 0;
    for (const f of files) {
      const delta = pos - 4;
      const fh = await open(f.path, 'r');
      try {
        for (let at = 4; at < f.dataEnd; ) {
          const n = Math.min(f.dataEnd - at, 8 << 20);
          await write(await readAt(fh, at, n));
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
            setInt(cc, offsetId, pos);
            setInt(cc, lengthId, bytes.length);
            await write(bytes);
          }
        }
      }
    }
    const meta = files[0]!.meta.map((f) => {
      if (f.id === FMD_NUM_ROWS) return { ...f, value: rows };
      if (f.id === FMD_ROW_GROUPS) return { ...f, value: { ...(f.value as TList), items: groups } };
      return f;
    });
    const footer = encodeStruct(meta);
    const tail = Buffer.alloc(8);
    tail.writeUInt32LE(footer.length, 0);
    MAGIC.copy(tail, 4);
    await write(footer);
    await write(tail);
    written = true;
    return { rows, rowGroups: groups.length };
  } finally {
    await out.close();
    if (!written) await unlink(output).catch(() => {});
  }
}
