// The footer of a Parquet file: "PAR1", the data, the FileMetaData (thrift compact), its length
// (u32 LE), "PAR1". Read by in-day compaction (to copy row groups) and by checks of a table's data
// files (a readable footer whose row count matches the log's statistics).

import { type FileHandle, open } from 'node:fs/promises';
import { decodeStruct, intField, type TStruct } from './thrift.ts';

const MAGIC = Buffer.from('PAR1');
/** FileMetaData.num_rows */
const FMD_NUM_ROWS = 3;

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

/** Reads and decodes the footer of an open file of `size` bytes; throws ParquetFileError. */
export async function readFooter(fh: FileHandle, size: number): Promise<ParquetFooter> {
  if (size < 12) throw new ParquetFileError(`not a Parquet file (${size} bytes)`);
  const tail = await readAt(fh, size - 8, 8);
  if (!tail.subarray(4).equals(MAGIC)) throw new ParquetFileError('not a Parquet file (no PAR1 at its end)');
  const length = tail.readUInt32LE(0);
  const start = size - 8 - length;
  if (start < 4) throw new ParquetFileError(`bad footer length ${length}`);
  const bytes = await readAt(fh, start, length);
  try {
    return { meta: decodeStruct(bytes), bytes, start };
  } catch (err) {
    throw new ParquetFileError(`unreadable footer: ${(err as Error).message}`);
  }
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
