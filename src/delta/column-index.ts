// Repairs a flaw of the Parquet files polars (nodejs-polars 0.26.1) writes: for a column chunk
// holding a NaN it leaves the min/max out of the chunk's statistics, as it should, but writes a
// ColumnIndex that marks the page all-null (null_pages [true], empty bounds). Readers that prune
// pages by the ColumnIndex (Spark's Parquet reader) then skip pages full of values: a filter on
// such a double column silently lost its rows there. The ColumnIndex of such a chunk is dropped
// from the footer (its bytes stay, unreferenced), so that readers read its pages; every other
// chunk keeps its index.

import { open } from 'node:fs/promises';
import {
  CC_COLUMN_INDEX_LENGTH,
  CC_COLUMN_INDEX_OFFSET,
  CC_META,
  CM_NUM_VALUES,
  CM_STATISTICS,
  FMD_ROW_GROUPS,
  MAGIC,
  RG_COLUMNS,
  ST_MAX,
  ST_MAX_VALUE,
  ST_MIN,
  ST_MIN_VALUE,
  ST_NULL_COUNT,
} from './parquet-format.ts';
import {
  decodeStruct,
  encodeStruct,
  field,
  intField,
  structField,
  structItems,
  type TStruct,
} from './thrift.ts';

const BOUNDS = [ST_MAX, ST_MIN, ST_MAX_VALUE, ST_MIN_VALUE];

/** A chunk with values but no bounds: whatever ColumnIndex its writer gave it is not trusted. */
function unbounded(columnMeta: TStruct): boolean {
  const stats = structField(columnMeta, CM_STATISTICS);
  if (stats && BOUNDS.some((id) => field(stats, id) !== undefined)) return false;
  const nulls = stats ? intField(stats, ST_NULL_COUNT) : undefined;
  const values = intField(columnMeta, CM_NUM_VALUES);
  return nulls === undefined || values === undefined || nulls < values;
}

/**
 * Drops the ColumnIndex of every column chunk of the file at `path` whose statistics have no
 * bounds although it holds values, rewriting the footer in place. Returns how many were dropped.
 */
export async function dropUnsoundColumnIndexes(path: string): Promise<number> {
  const fh = await open(path, 'r+');
  try {
    const size = (await fh.stat()).size;
    const tail = Buffer.alloc(8);
    await fh.read(tail, 0, 8, size - 8);
    if (!tail.subarray(4).equals(MAGIC)) throw new Error(`${path} is not a Parquet file`);
    const footerStart = size - 8 - tail.readUInt32LE(0);
    const footer = Buffer.alloc(size - 8 - footerStart);
    await fh.read(footer, 0, footer.length, footerStart);
    const meta = decodeStruct(footer);
    let dropped = 0;
    for (const rg of structItems(meta, FMD_ROW_GROUPS)) {
      for (const cc of structItems(rg, RG_COLUMNS)) {
        const m = structField(cc, CC_META);
        if (!m || field(cc, CC_COLUMN_INDEX_OFFSET) === undefined || !unbounded(m)) continue;
        const kept = cc.filter((f) => f.id !== CC_COLUMN_INDEX_OFFSET && f.id !== CC_COLUMN_INDEX_LENGTH);
        cc.splice(0, cc.length, ...kept);
        dropped++;
      }
    }
    if (dropped > 0) {
      const fixed = encodeStruct(meta);
      const newTail = Buffer.alloc(8);
      newTail.writeUInt32LE(fixed.length, 0);
      MAGIC.copy(newTail, 4);
      await fh.write(Buffer.concat([fixed, newTail]), 0, fixed.length + 8, footerStart);
      await fh.truncate(footerStart + fixed.length + 8);
    }
    return dropped;
  } finally {
    await fh.close();
  }
}
