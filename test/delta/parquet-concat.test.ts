import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pl from 'nodejs-polars';
import { batchFromRows } from '../../src/delta/batch.ts';
import { concatParquet, mergeRowGroups, NotConcatenable } from '../../src/delta/parquet-concat.ts';
import { writeParquetFile } from '../../src/delta/parquet-writer.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import {
  CompactReader,
  decodeStruct,
  encodeStruct,
  field,
  intField,
  listField,
  structField,
  T_BOOL_FALSE,
  T_BOOL_TRUE,
  T_STRUCT,
  ThriftError,
  type TStruct,
} from '../../src/delta/thrift.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { chunkRange, chunksOf, createdBy, footerOf, rowGroupsOf } from './footer.ts';
import { readRows, sortRows } from './read.ts';
import { makeRows, rowToJson } from './rows.ts';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'otelake-concat-'));
  dirs.push(d);
  return d;
}

after(async () => {
  await closeDeltaWorkers();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Data files written by the engine: one per batch size, in rows groups of `rowGroupSize`. */
async function dataFiles(
  table: TableName,
  sizes: number[],
  rowGroupSize: number,
  seed = 1,
): Promise<string[]> {
  const schema = SCHEMAS[table];
  const t = await DeltaTable.createOrOpen(join(tempDir(), table), schema, { rowGroupSize, fsync: false });
  for (const [i, n] of sizes.entries()) {
    await t.append(
      batchFromRows(schema, makeRows(schema, n, seed * 100 + i, i * 1000, { specialDoubles: true })),
    );
  }
  const paths = t.liveFilePaths();
  await t.close();
  return paths;
}

function frameOf(paths: string[], table: TableName): pl.DataFrame {
  const names = SCHEMAS[table].columns.map((c) => c.name);
  return pl.concat(paths.map((p) => pl.readParquet(p).select(...names)));
}

test('thrift compact structs decode and encode back to the same bytes', () => {
  const nested: TStruct = [
    { id: 1, type: 8, value: Buffer.from('name') },
    { id: 2, type: T_BOOL_TRUE, value: T_BOOL_TRUE },
    { id: 3, type: T_BOOL_FALSE, value: T_BOOL_FALSE },
  ];
  const struct: TStruct = [
    { id: 1, type: 5, value: -7 },
    { id: 2, type: 6, value: 2 ** 53 - 1 },
    { id: 3, type: 6, value: -(2n ** 63n) },
    { id: 4, type: 6, value: 2n ** 62n + 1n },
    { id: 5, type: 4, value: -300 },
    { id: 30, type: 3, value: 200 }, // a field id jump past 15 takes the long form
    { id: 31, type: 7, value: new Uint8Array([0, 0, 0, 0, 0, 0, 0xf0, 0x3f]) },
    {
      id: 32,
      type: 9,
      value: { elemType: 5, set: false, items: Array.from({ length: 20 }, (_, i) => i - 10) },
    },
    { id: 33, type: 9, value: { elemType: T_STRUCT, set: false, items: [nested, []] } },
    { id: 34, type: 10, value: { elemType: 8, set: true, items: [Buffer.from('a')] } },
    {
      id: 35,
      type: 11,
      value: { keyType: 8, valueType: 6, entries: [[Buffer.from('k'), 1_000_000_000_000]] },
    },
    { id: 36, type: 11, value: { keyType: 0, valueType: 0, entries: [] } },
    { id: 37, type: T_STRUCT, value: nested },
  ];
  const bytes = encodeStruct(struct);
  const decoded = decodeStruct(bytes);
  assert.deepEqual(Buffer.from(encodeStruct(decoded)), Buffer.from(bytes));
  assert.equal(intField(decoded, 2), 2 ** 53 - 1);
  assert.equal(decoded.find((f) => f.id === 3)!.value, -(2n ** 63n));
  assert.equal(decoded.find((f) => f.id === 4)!.value, 2n ** 62n + 1n);
  assert.equal(intField(decoded, 5), -300);
  assert.equal((decoded.find((f) => f.id === 32)!.value as { items: number[] }).items.length, 20);
  for (let n = 0; n < bytes.length; n++) {
    assert.throws(() => decodeStruct(bytes.subarray(0, n)), ThriftError, `truncated at ${n}`);
  }
});

test('footers of the data files the engine writes encode back to their own bytes', async () => {
  for (const table of ['spans', 'metrics_hist', 'logs'] as const) {
    for (const path of await dataFiles(table, [300], 128)) {
      const { bytes, meta } = footerOf(path);
      assert.deepEqual(Buffer.from(encodeStruct(meta)), bytes, table);
      assert.equal(rowGroupsOf(meta).length, 3);
    }
  }
});

/** Copies of `paths` written by polars (as compaction rewrites files), with page indexes. */
function polarsCopies(paths: readonly string[], rowGroupSize: number): string[] {
  const dir = tempDir();
  return paths.map((p, i) => {
    const copy = join(dir, `polars-${i}.parquet`);
    pl.scanParquet(p)
      .sinkParquet(copy, { compression: 'zstd', statistics: true, rowGroupSize })
      .collectSync();
    return copy;
  });
}

for (const writer of ['the engine', 'polars']) {
  test(`concatParquet copies the row groups of its inputs (written by ${writer}), in order, with their offsets moved`, async () => {
    // metrics_hist has lists, doubles (NaN, infinities), longs, timestamps and nulls.
    const engineFiles = await dataFiles('metrics_hist', [150, 70, 260], 64);
    const inputs = writer === 'polars' ? polarsCopies(engineFiles, 64) : engineFiles;
    const output = join(tempDir(), 'joined.parquet');
    const result = await concatParquet(inputs, output, 1);

    const groupsIn = inputs.map((p) => rowGroupsOf(footerOf(p).meta));
    assert.deepEqual(result, { rows: 480, rowGroups: groupsIn.flat().length });
    assert.ok(
      frameOf([output], 'metrics_hist').frameEqual(frameOf(inputs, 'metrics_hist'), true),
      'same rows in the same order',
    );
    assert.deepEqual(readRows([output], SCHEMAS.metrics_hist), readRows(inputs, SCHEMAS.metrics_hist));

    const out = readFileSync(output);
    const { meta } = footerOf(output);
    assert.equal(intField(meta, 3), 480);
    const groupsOut = rowGroupsOf(meta);
    const chunksIn = groupsIn.flatMap((groups, f) =>
      groups.flatMap((g) => chunksOf(g).map((c) => ({ c, f }))),
    );
    const chunksOut = groupsOut.flatMap(chunksOf);
    assert.equal(chunksOut.length, chunksIn.length);
    groupsOut.forEach((g, i) => {
      assert.equal(intField(g, 7), i, 'ordinal');
      assert.equal(intField(g, 5), chunkRange(chunksOf(g)[0]!)[0], 'row group offset at its first chunk');
    });
    chunksOut.forEach((chunk, i) => {
      const [start, length] = chunkRange(chunk);
      const [inStart] = chunkRange(chunksIn[i]!.c);
      const source = readFileSync(inputs[chunksIn[i]!.f]!);
      assert.deepEqual(out.subarray(start, start + length), source.subarray(inStart, inStart + length));
      // The offset index names the chunk's pages at their new place, the same distance into the chunk.
      const inChunk = chunksIn[i]!.c;
      // The engine writes no page indexes; polars does, and the output must carry them moved.
      assert.equal(
        intField(inChunk, 4) !== undefined,
        writer === 'polars',
        'an offset index iff polars wrote it',
      );
      if (writer !== 'polars') {
        assert.equal(intField(chunk, 4), undefined);
        return;
      }
      const pagesOf = (file: Buffer, c: TStruct, chunkStart: number) => {
        const oi = decodeStruct(file.subarray(intField(c, 4)!, intField(c, 4)! + intField(c, 5)!));
        return (listField(oi, 1)!.items as TStruct[]).map((p) => [
          intField(p, 1)! - chunkStart,
          intField(p, 2),
        ]);
      };
      const pages = pagesOf(out, chunk, start);
      assert.deepEqual(pages, pagesOf(source, inChunk, inStart));
      assert.equal(pages[0]![0]! + start, intField(structField(chunk, 3)!, 9), 'first page is the data page');
      const ci = out.subarray(intField(chunk, 6)!, intField(chunk, 6)! + intField(chunk, 7)!);
      assert.deepEqual(
        ci,
        source.subarray(intField(inChunk, 6)!, intField(inChunk, 6)! + intField(inChunk, 7)!),
      );
    });
  });
}

test('concatParquet refuses files it cannot join, and leaves no output', async () => {
  const spans = await dataFiles('spans', [100, 100], 50);
  const logs = await dataFiles('logs', [100], 50, 2);
  const notParquet = join(tempDir(), 'x.parquet');
  writeFileSync(notParquet, 'not a parquet file at all');
  const truncated = join(tempDir(), 'cut.parquet');
  const whole = readFileSync(spans[0]!);
  writeFileSync(truncated, Buffer.concat([whole.subarray(0, 100), whole.subarray(whole.length - 8)]));
  const cases: [string, string[], number][] = [
    ['row groups below the minimum', spans, 51],
    ['different schemas', [spans[0]!, logs[0]!], 1],
    ['not Parquet', [spans[0]!, notParquet], 1],
    ['footer length past the file', [truncated, spans[1]!], 1],
  ];
  for (const [label, inputs, min] of cases) {
    const output = join(tempDir(), 'out.parquet');
    await assert.rejects(concatParquet(inputs, output, min), NotConcatenable, label);
    assert.equal(existsSync(output), false, label);
  }
  // Row groups of exactly the minimum are copied.
  const output = join(tempDir(), 'ok.parquet');
  assert.deepEqual(await concatParquet(spans, output, 50), { rows: 200, rowGroups: 4 });
});

test('in-day compaction copies row groups of copyRowGroupsFrom rows or more, merges smaller', async () => {
  const schema = SCHEMAS.spans;
  for (const [from, copied] of [
    [100, true],
    [101, false],
  ] as const) {
    const t = await DeltaTable.createOrOpen(join(tempDir(), 'spans'), schema, {
      autoCompact: { minFiles: 3, smallFileRows: 1000, copyRowGroupsFrom: from },
      fsync: false,
    });
    const rows = [];
    for (let i = 0; i < 3; i++) {
      const batch = makeRows(schema, 100, 40 + i, i * 100);
      rows.push(...batch);
      await t.append(batchFromRows(schema, batch));
    }
    await t.close();
    assert.deepEqual(t.backgroundErrors, []);
    assert.equal(t.files.length, 1, 'the three files were compacted');
    const [path] = t.liveFilePaths();
    assert.equal(rowGroupsOf(footerOf(path!).meta).length, copied ? 3 : 1, `copyRowGroupsFrom ${from}`);
    assert.equal(t.rowCount(), 300);
    assert.deepEqual(readRows([path!], schema), sortRows(rows.map((r) => rowToJson(schema, r))));
  }
});

test('mergeRowGroups joins small row groups of files the engine wrote into larger ones', async () => {
  // metrics_hist has lists, doubles (NaN, infinities), longs, timestamps and nulls.
  const inputs = await dataFiles('metrics_hist', [150, 70, 260], 64);
  const output = join(tempDir(), 'merged.parquet');
  // Row groups of 64, 64, 22 | 64, 6 | 64, 64, 64, 64, 4 rows, joined in order into groups of up
  // to 200 rows.
  assert.deepEqual(await mergeRowGroups(inputs, output, 200, 3), { rows: 480, rowGroups: 3 });
  assert.ok(
    frameOf([output], 'metrics_hist').frameEqual(frameOf(inputs, 'metrics_hist'), true),
    'same rows in the same order',
  );
  const groups = rowGroupsOf(footerOf(output).meta);
  assert.deepEqual(
    groups.map((g) => intField(g, 3)),
    [150, 198, 132],
  );
  // Each joined chunk's statistics are those of its rows: null count, and min and max of longs.
  // A column of an enclosing message has one dictionary of its rows' distinct values.
  const all = frameOf([output], 'metrics_hist');
  const file = readFileSync(output);
  let at = 0;
  for (const g of groups) {
    const n = intField(g, 3)!;
    const rows = all.slice(at, n);
    at += n;
    for (const [i, cc] of chunksOf(g).entries()) {
      const { name, type, enclosing } = SCHEMAS.metrics_hist.columns[i]!;
      const dictionaryAt = intField(structField(cc, 3)!, 11);
      assert.equal(dictionaryAt !== undefined, enclosing === true, `${name}: a dictionary page`);
      if (enclosing) {
        const head = new CompactReader(file, dictionaryAt!).struct();
        const distinct = rows.getColumn(name).dropNulls().unique().length;
        assert.equal(intField(structField(head, 7)!, 1), distinct, `${name}: distinct values`);
      }
      const stats = structField(structField(cc, 3)!, 12);
      // The writer gives lists no statistics (see parquet-writer.ts).
      assert.equal(stats === undefined, typeof type !== 'string', name);
      if (stats === undefined) continue;
      assert.equal(intField(stats, 3), rows.getColumn(name).nullCount(), `${name} null count`);
      if (name !== 'count') continue;
      // As strings: polars hands int64 values over as numbers, losing digits.
      const values = (rows.getColumn(name).cast(pl.Utf8).dropNulls().toArray() as string[]).map(BigInt);
      const le = (f: number) => Buffer.from(field(stats, f)!.value as Uint8Array).readBigInt64LE();
      const sorted = values.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      assert.equal(le(5), sorted.at(-1), 'max');
      assert.equal(le(6), sorted[0], 'min');
    }
  }
});

test('mergeRowGroups refuses files the engine did not write, and leaves no output', async () => {
  const spans = await dataFiles('spans', [100, 100], 50);
  const logs = await dataFiles('logs', [100], 50, 2);
  // A file of the engine before it wrote dictionaries: its resource and scope columns PLAIN.
  const plain = join(tempDir(), 'plain.parquet');
  const columns = SCHEMAS.spans.columns.map(({ enclosing: _, ...c }) => c);
  writeParquetFile(plain, columns, batchFromRows(SCHEMAS.spans, makeRows(SCHEMAS.spans, 100, 7)), {
    zstdLevel: 3,
    rowGroupSize: 50,
  });
  for (const [label, inputs] of [
    ['written by polars', [spans[0]!, ...polarsCopies([spans[1]!], 50)]],
    ['different schemas', [spans[0]!, logs[0]!]],
    ['a dictionary in some files only', [spans[0]!, plain]],
  ] as const) {
    const output = join(tempDir(), 'out.parquet');
    await assert.rejects(mergeRowGroups(inputs, output, 1000, 3), NotConcatenable, label);
    assert.equal(existsSync(output), false, label);
  }
});

test('in-day compaction rewrites files another writer wrote', async () => {
  const schema = SCHEMAS.spans;
  const t = await DeltaTable.createOrOpen(join(tempDir(), 'spans'), schema, {
    autoCompact: { minFiles: 3, smallFileRows: 1000 },
    fsync: false,
  });
  const rows = [];
  for (let i = 0; i < 3; i++) {
    const batch = makeRows(schema, 100, 50 + i, i * 100);
    rows.push(...batch);
    await t.append(batchFromRows(schema, batch));
    // The first two files as polars writes them (an older version of the engine did).
    if (i === 0) {
      const [path] = t.liveFilePaths();
      const [copy] = polarsCopies([path!], 1000);
      renameSync(copy!, path!);
    }
  }
  await t.close();
  assert.deepEqual(t.backgroundErrors, []);
  assert.equal(t.files.length, 1, 'the three files were compacted');
  const [path] = t.liveFilePaths();
  assert.match(createdBy(path!), /^Polars/, 'rewritten by polars');
  assert.deepEqual(readRows([path!], schema), sortRows(rows.map((r) => rowToJson(schema, r))));
});

test("OPTIMIZE with join merges the engine's files page by page; without, polars rewrites them", async () => {
  const schema = SCHEMAS.spans;
  for (const merge of [true, false]) {
    const t = await DeltaTable.createOrOpen(join(tempDir(), 'spans'), schema, {
      rowGroupSize: 100,
      fsync: false,
    });
    const rows = [];
    for (let i = 0; i < 6; i++) {
      const batch = makeRows(schema, 40, 70 + i, i * 100);
      rows.push(...batch);
      await t.append(batchFromRows(schema, batch));
    }
    assert.deepEqual(await t.optimize({ targetFileRows: 1000, join: merge }), {
      removed: 6,
      added: 1,
      version: 7,
    });
    const [path] = t.liveFilePaths();
    const meta = footerOf(path!).meta;
    const writer = createdBy(path!);
    if (merge) {
      assert.doesNotMatch(writer, /^Polars/, `merged, not rewritten: ${writer}`);
      // The six files' row groups of 40 joined, whole, into row groups of at most 100.
      assert.deepEqual(
        rowGroupsOf(meta).map((g) => Number(intField(g, 3))),
        [80, 80, 80],
      );
    } else assert.match(writer, /^Polars/, 'rewritten by polars');
    assert.equal(t.rowCount(), 240);
    assert.deepEqual(readRows([path!], schema), sortRows(rows.map((r) => rowToJson(schema, r))));
    await t.close();
  }
});
