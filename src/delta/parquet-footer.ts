// The footer of a Parquet file: "PAR1", the data, the FileMetaData (thrift compact), its length
// (u32 LE), "PAR1". Read by in-day compaction (to copy row groups) and by checks of a table's data
// files (a readable footer whose row count matches the log's statistics).

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { decodeStruct, intField, structItems, type TStruct } from './thrift.ts';

const MAGIC = Buffer.from('PAR1');
/** FileMetaData.num_rows */
const FMD_NUM_ROWS = 3;
/** FileMetaData.row_groups */
const FMD_ROW_GROUPS = 4;
/** RowGroup.num_rows */
const RG_NUM_ROWS = 3;

/** A file that is not a readable Parquet file; the message says what is wrong. */
export class ParquetFileError extends Error {
  override name = 'ParquetFileError';
}

export interface ParquetFooter {
  /** FileMetaData, decoded. */
  meta: TStruct;
  /** Its bytes as stored. */
  bytes: Buffer;
  /** Where it starts in the file. */
  start: number;
}

export async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length);
  const { bytesRead } = await fh.read(buf, 0, length, position);
  if (bytesRead !== length) throw new ParquetFileError('file shorter than its footer says');
  return buf;
}

/** Throws for a file too small to hold a footer. */
function checkSize(size: number): void {
  if (size < 12) throw new ParquetFileError(`not a Parquet file (${size} bytes)`);
}

/** Where the footer of a file of `size` bytes starts and how long it is, from the file's last 8 bytes. */
function footerPlace(size: number, tail: Buffer): { start: number; length: number } {
  if (!tail.subarray(4).equals(MAGIC)) throw new ParquetFileError('not a Parquet file (no PAR1 at its end)');
  const length = tail.readUInt32LE(0);
  const start = size - 8 - length;
  if (start < 4) throw new ParquetFileError(`bad footer length ${length}`);
  return { start, length };
}

function decodeFooter(bytes: Buffer): TStruct {
  try {
    return decodeStruct(bytes);
  } catch (err) {
    throw new ParquetFileError(`unreadable footer: ${(err as Error).message}`);
  }
}

/** Reads and decodes the footer of an open file of `size` bytes; throws ParquetFileError. */
export async function readFooter(fh: FileHandle, size: number): Promise<ParquetFooter> {
  checkSize(size);
  const { start, length } = footerPlace(size, await readAt(fh, size - 8, 8));
  const bytes = await readAt(fh, start, length);
  return { meta: decodeFooter(bytes), bytes, start };
}

/** The size and row count of a Parquet file, from its footer; throws ParquetFileError or a file error. */
export async function parquetRowCount(path: string): Promise<{ size: number; rows: number }> {
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    const { meta } = await readFooter(fh, size);
    const rows = intField(meta, FMD_NUM_ROWS);
    if (rows === undefined) throw new ParquetFileError('footer without num_rows');
    return { size, rows };
  } finally {
    await fh.close();
  }
}

/**
 * The first row of each row group of a local Parquet file, from its footer, read synchronously
 * (for polars' synchronous work in a worker); throws ParquetFileError or a file error.
 */
export function rowGroupStarts(path: string): number[] {
  const fd = openSync(path, 'r');
  try {
    const read = (position: number, length: number) => {
      const buf = Buffer.allocUnsafe(length);
      if (readSync(fd, buf, 0, length, position) !== length)
        throw new ParquetFileError('file shorter than its footer says');
      return buf;
    };
    const size = fstatSync(fd).size;
    checkSize(size);
    const { start, length } = footerPlace(size, read(size - 8, 8));
    const starts: number[] = [];
    let row = 0;
    for (const group of structItems(decodeFooter(read(start, length)), FMD_ROW_GROUPS)) {
      starts.push(row);
      row += intField(group, RG_NUM_ROWS) ?? 0;
    }
    return starts;
  } finally {
    closeSync(fd);
  }
}
