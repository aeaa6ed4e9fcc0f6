// A Parquet file's footer as tests look into it: its row groups, column chunks and writer.

import { readFileSync } from 'node:fs';
import {
  decodeStruct,
  field,
  intField,
  listField,
  structField,
  type TStruct,
} from '../../src/delta/thrift.ts';

/** The FileMetaData of a file (or of its bytes), decoded, and its bytes. */
export function footerOf(file: string | Buffer): { bytes: Buffer; meta: TStruct } {
  const data = typeof file === 'string' ? readFileSync(file) : file;
  const length = data.readUInt32LE(data.length - 8);
  const bytes = data.subarray(data.length - 8 - length, data.length - 8);
  return { bytes, meta: decodeStruct(bytes) };
}

export const rowGroupsOf = (meta: TStruct) => listField(meta, 4)!.items as TStruct[];
export const chunksOf = (rowGroup: TStruct) => listField(rowGroup, 1)!.items as TStruct[];

/** Start and length of a column chunk's pages (dictionary page first, when there is one). */
export function chunkRange(chunk: TStruct): [number, number] {
  const m = structField(chunk, 3)!;
  const dict = intField(m, 11);
  const start = dict !== undefined && dict > 0 ? Math.min(dict, intField(m, 9)!) : intField(m, 9)!;
  return [start, intField(m, 7)!];
}

/** The writer a file names (FileMetaData.created_by). */
export function createdBy(file: string | Buffer): string {
  return Buffer.from(field(footerOf(file).meta, 6)!.value as Uint8Array).toString();
}
