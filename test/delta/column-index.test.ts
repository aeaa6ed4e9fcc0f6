import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pl from 'nodejs-polars';
import { batchFromRows } from '../../src/delta/batch.ts';
import { dropUnsoundColumnIndexes } from '../../src/delta/column-index.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import {
  decodeStruct,
  field,
  intField,
  listField,
  structField,
  structItems,
} from '../../src/delta/thrift.ts';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { readRows, sortRows } from './read.ts';
import { makeRows, rowToJson } from './rows.ts';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'otelake-column-index-'));
  dirs.push(d);
  return d;
}

after(async () => {
  await closeDeltaWorkers();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Chunk {
  column: string;
  /** The chunk's statistics carry min/max. */
  bounded: boolean;
  /** The chunk holds a non-null value. */
  hasValues: boolean;
  /** null_pages of its ColumnIndex (true = the page holds only nulls), or null without one. */
  nullPages: boolean[] | null;
}

/** Every column chunk of a Parquet file, as its footer and ColumnIndex describe it. */
function chunks(path: string): Chunk[] {
  const buf = readFileSync(path);
  const footerLength = buf.readUInt32LE(buf.length - 8);
  const meta = decodeStruct(buf.subarray(buf.length - 8 - footerLength, buf.length - 8));
  const out: Chunk[] = [];
  for (const rg of structItems(meta, 4)) {
    for (const cc of structItems(rg, 1)) {
      const m = structField(cc, 3)!;
      const column = listField(m, 3)!
        .items.map((p) => Buffer.from(p as Uint8Array).toString())
        .join('.');
      const stats = structField(m, 12);
      const bounded = stats !== undefined && field(stats, 5) !== undefined && field(stats, 6) !== undefined;
      const hasValues = intField(stats ?? [], 3)! < intField(m, 5)!;
      const at = intField(cc, 6);
      let nullPages: boolean[] | null = null;
      if (at !== undefined) {
        const index = decodeStruct(buf.subarray(at, at + intField(cc, 7)!));
        // Booleans in a compact-protocol list: 1 = true.
        nullPages = listField(index, 1)!.items.map((b) => b === 1);
      }
      out.push({ column, bounded, hasValues, nullPages });
    }
  }
  return out;
}

test('a chunk with NaN keeps no ColumnIndex that calls its page all-null; other chunks keep theirs', async () => {
  const dir = tempDir();
  const path = join(dir, 'nan.parquet');
  const frame = pl.DataFrame({
    with_nan: new Float64Array([1.5, Number.NaN, 2.5]),
    plain: new Float64Array([1, 2, 3]),
  });
  frame.lazy().sinkParquet(path, { compression: 'zstd', statistics: true }).collectSync();
  const before = chunks(path);
  const rows = pl.readParquet(path).toRecords();

  const dropped = await dropUnsoundColumnIndexes(path);
  const after = chunks(path);
  // What polars wrote for the NaN column is what this repairs: no bounds, a page called null.
  assert.deepEqual(
    before.map((c) => [c.column, c.bounded, c.nullPages]),
    [
      ['with_nan', false, [true]],
      ['plain', true, [false]],
    ],
  );
  assert.equal(dropped, 1);
  assert.deepEqual(
    after.map((c) => [c.column, c.nullPages]),
    [
      ['with_nan', null],
      ['plain', [false]],
    ],
  );
  assert.deepEqual(pl.readParquet(path).toRecords(), rows);
  assert.equal(await dropUnsoundColumnIndexes(path), 0); // nothing left to drop
});

test('data files the engine writes never call a page with values all-null', async () => {
  const dir = join(tempDir(), 'table');
  const schema = SCHEMAS.metrics_points;
  const t = await DeltaTable.createOrOpen(dir, schema);
  const rows = [];
  for (let i = 0; i < 4; i++) {
    const batch = makeRows(schema, 40, i, i * 100, { specialDoubles: true });
    rows.push(...batch);
    await t.append(batchFromRows(schema, batch));
  }
  await t.optimize(); // a rewrite by polars, too
  await t.close();
  const all = t.liveFilePaths().flatMap(chunks);
  for (const c of all) {
    if (c.nullPages !== null && c.hasValues) assert.ok(!c.nullPages.every(Boolean), c.column);
  }
  // The rows contain NaN, so the repair had something to do; the rest kept their indexes.
  assert.ok(all.some((c) => c.column === 'value_double' && c.nullPages === null));
  assert.ok(all.some((c) => c.column === 'project_id' && c.nullPages !== null));
  assert.deepEqual(readRows(t.liveFilePaths(), schema), sortRows(rows.map((r) => rowToJson(schema, r))));
});
