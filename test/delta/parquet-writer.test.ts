import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pl from 'nodejs-polars';
import {
  BatchBuilder,
  batchFromRows,
  type ColumnBatch,
  joinBatches,
  packBatch,
  unpackBatch,
} from '../../src/delta/batch.ts';
import { readAt, readFooter } from '../../src/delta/parquet-footer.ts';
import { writeParquetFile } from '../../src/delta/parquet-writer.ts';
import {
  CompactReader,
  encodeStruct,
  field,
  intField,
  listField,
  structField,
  type TStruct,
} from '../../src/delta/thrift.ts';
import { SCHEMAS, TABLE_NAMES } from '../../src/schema/tables.ts';
import { readRows, sortRows } from './read.ts';
import { makeRows, rowToJson } from './rows.ts';

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'otelake-pqw-'));
}

test('every table: a batch written by the writer reads back exactly with polars', () => {
  const dir = tempDir();
  try {
    for (const name of TABLE_NAMES) {
      const schema = SCHEMAS[name];
      const rows = makeRows(schema, 300, 11, 0, { specialDoubles: true, extremeTimestamps: true });
      const path = join(dir, `${name}.parquet`);
      writeParquetFile(path, schema.columns, batchFromRows(schema, rows), {
        zstdLevel: 3,
        rowGroupSize: 1000,
      });
      const expected = sortRows(rows.map((r) => rowToJson(schema, r)));
      assert.deepEqual(readRows([path], schema), expected, name);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('row groups and pages: many of each, and the footer says so', async () => {
  const dir = tempDir();
  try {
    const schema = SCHEMAS.logs;
    // Bodies of ~40 KiB: a 1 MiB page holds ~25 of them, so 230 rows make several pages per group.
    const rows = makeRows(schema, 230, 5).map((r, i) => ({ ...r, body: `${i}:`.padEnd(40_000, 'xyz') }));
    const path = join(dir, 'logs.parquet');
    writeParquetFile(path, schema.columns, batchFromRows(schema, rows), { zstdLevel: 1, rowGroupSize: 100 });
    assert.deepEqual(readRows([path], schema), sortRows(rows.map((r) => rowToJson(schema, r))));
    const fh = await open(path, 'r');
    try {
      const { meta } = await readFooter(fh, (await fh.stat()).size);
      const groups = field(meta, 4)!.value as { items: unknown[] };
      assert.equal(groups.items.length, 3);
      assert.equal(field(meta, 3)!.value, 230);
    } finally {
      await fh.close();
    }
    const df = pl.readParquet(path);
    assert.equal(df.height, 230);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file larger than the write buffer: its bytes arrive whole and in order', () => {
  const dir = tempDir();
  try {
    const schema = SCHEMAS.logs;
    // Bodies zstd cannot shrink: ~2 MB of pages in 1 MiB writes, and one page of its own over 1 MiB.
    const noise = (n: number) => randomBytes(n).toString('base64').slice(0, n);
    const rows = makeRows(schema, 250, 9).map((r, i) => ({
      ...r,
      body: noise(i === 100 ? 1_500_000 : 8_000),
    }));
    const path = join(dir, 'logs.parquet');
    writeParquetFile(path, schema.columns, batchFromRows(schema, rows), { zstdLevel: 3, rowGroupSize: 1000 });
    assert.ok(statSync(path).size > 2_000_000, `${statSync(path).size} bytes`);
    assert.deepEqual(readRows([path], schema), sortRows(rows.map((r) => rowToJson(schema, r))));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('repeated strings (a resource over many rows) are written out in every row', () => {
  const dir = tempDir();
  try {
    const schema = SCHEMAS.spans;
    const base = makeRows(schema, 50, 3);
    // One resource for runs of rows, nulls between: the builder stores each run's value once.
    const rows = base.map((r, i) => ({
      ...r,
      resource_attributes: i % 17 === 5 ? null : `{"service.name":"svc-${Math.floor(i / 10)}"}`,
    }));
    const batch = batchFromRows(schema, rows);
    const path = join(dir, 'spans.parquet');
    // Row groups of 7 start inside runs: a group's first row can be a repeat.
    writeParquetFile(path, schema.columns, batch, { zstdLevel: 3, rowGroupSize: 7 });
    assert.deepEqual(readRows([path], schema), sortRows(rows.map((r) => rowToJson(schema, r))));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('columns of an enclosing message are dictionary-encoded: their distinct values once, in every row group', async () => {
  const dir = tempDir();
  try {
    const schema = SCHEMAS.spans;
    const resources = ['{"service.name":"a"}', '{"service.name":"é"}', '{"service.name":"Ã©"}'];
    // Runs of 40 rows cycling through a, é and é's latin-1 look-alike, nulls between.
    const rows = makeRows(schema, 600, 4).map((r, i) => ({
      ...r,
      resource_attributes: i % 50 === 7 ? null : resources[Math.floor(i / 40) % 3]!,
      service_name: Math.floor(i / 40) % 3 === 1 ? 'é' : 'Ã©',
      scope_schema_url: null,
      scope_name: i % 3 === 0 ? '' : 'scope', // the empty string is a value of its own
    }));
    const path = join(dir, 'spans.parquet');
    // Row groups of 250 begin inside runs.
    writeParquetFile(path, schema.columns, batchFromRows(schema, rows), { zstdLevel: 3, rowGroupSize: 250 });
    assert.deepEqual(readRows([path], schema), sortRows(rows.map((r) => rowToJson(schema, r))));

    const fh = await open(path, 'r');
    try {
      const { meta } = await readFooter(fh, (await fh.stat()).size);
      const groups = listField(meta, 4)!.items as TStruct[];
      assert.equal(groups.length, 3);
      for (const [g, group] of groups.entries()) {
        const groupRows = rows.slice(g * 250, (g + 1) * 250);
        for (const [c, chunk] of (listField(group, 1)!.items as TStruct[]).entries()) {
          const def = schema.columns[c]!;
          const m = structField(chunk, 3)!;
          const encodings = listField(m, 2)!.items;
          if (!def.enclosing) {
            assert.equal(intField(m, 11), undefined, `${def.name}: no dictionary`);
            assert.ok(!encodings.includes(8), def.name);
            continue;
          }
          assert.ok(encodings.includes(8), `${def.name}: RLE_DICTIONARY`);
          const at = intField(m, 11)!;
          assert.ok(at > 0 && at < intField(m, 9)!, `${def.name}: the dictionary page before the data`);
          const head = new CompactReader(await readAt(fh, at, 64)).struct();
          assert.equal(intField(head, 1), 2, 'a DICTIONARY_PAGE');
          const values = groupRows.map((r) => r[def.name as keyof typeof r]).filter((v) => v != null);
          assert.equal(
            intField(structField(head, 7)!, 1),
            new Set(values).size,
            `${def.name}: distinct values`,
          );
        }
      }
    } finally {
      await fh.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the schema is the one polars writes, so compaction can join files of both writers', async () => {
  // Polars rewrites files in compaction: a file it writes from ours has the schema it writes.
  const dir = tempDir();
  try {
    for (const name of TABLE_NAMES) {
      const schema = SCHEMAS[name];
      const batch = batchFromRows(schema, makeRows(schema, 20, 2));
      const ours = join(dir, `${name}-ours.parquet`);
      const theirs = join(dir, `${name}-polars.parquet`);
      writeParquetFile(ours, schema.columns, batch, { zstdLevel: 3, rowGroupSize: 1000 });
      pl.scanParquet(ours).sinkParquet(theirs, { compression: 'zstd' }).collectSync();
      const schemaOf = async (path: string) => {
        const fh = await open(path, 'r');
        try {
          const { meta } = await readFooter(fh, (await fh.stat()).size);
          return Buffer.from(encodeStruct([field(meta, 2)!]));
        } finally {
          await fh.close();
        }
      };
      assert.deepEqual(await schemaOf(ours), await schemaOf(theirs), name);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The batch written and read back by polars. */
function roundTrip(schema: (typeof SCHEMAS)[keyof typeof SCHEMAS], batch: ColumnBatch): pl.DataFrame {
  const dir = tempDir();
  try {
    const path = join(dir, 't.parquet');
    writeParquetFile(path, schema.columns, batch, { zstdLevel: 3, rowGroupSize: 4096 });
    return pl.readParquet(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('column types are the Delta storage types, in the order of the schema', () => {
  const schema = SCHEMAS.metrics_hist;
  const df = roundTrip(schema, batchFromRows(schema, makeRows(schema, 3, 1)));
  assert.equal(String(df.schema.event_ts), String(pl.Datetime('us', 'UTC')));
  assert.equal(String(df.schema.count), String(pl.Int64));
  assert.equal(String(df.schema.scale), String(pl.Int32));
  assert.equal(String(df.schema.bucket_counts), String(pl.List(pl.Int64)));
  assert.equal(String(df.schema.explicit_bounds), String(pl.List(pl.Float64)));
  assert.equal(String(df.schema.project_id), String(pl.String));
  assert.deepEqual(
    df.columns,
    schema.columns.map((c) => c.name),
  );
});

test('strings: non-ASCII, empty, null and lone surrogates (stored as U+FFFD)', () => {
  const schema = SCHEMAS.logs;
  const bodies = ['plain', '', null, '😀 é 中', 'end\ud83d', '\ude00start', 'x'];
  const rows = bodies.map((body, i) => ({ project_id: `p${i}`, event_ts: 1n, time_unix_nano: 1n, body }));
  const df = roundTrip(schema, batchFromRows(schema, rows));
  assert.deepEqual(df.getColumn('body').toArray(), [
    'plain',
    '',
    null,
    '😀 é 中',
    'end\ufffd',
    '\ufffdstart',
    'x',
  ]);
  assert.deepEqual(df.getColumn('project_id').toArray(), ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6']);
});

test('strings of every length around the short-value copy (0-70 bytes, multibyte too) read back whole', () => {
  const schema = SCHEMAS.logs;
  const bodies = Array.from({ length: 71 }, (_, n) =>
    n % 3 === 0 ? 'é'.repeat(n >> 1) + 'x'.repeat(n & 1) : 'ab'.repeat(n).slice(0, n),
  );
  const rows = bodies.map((body, i) => ({ project_id: `p${i}`, event_ts: 1n, time_unix_nano: 1n, body }));
  const df = roundTrip(schema, batchFromRows(schema, rows));
  assert.deepEqual(df.getColumn('body').toArray(), bodies);
});

test('string columns (arrays of strings) are written like built ones', () => {
  const schema = SCHEMAS.logs;
  const pattern = ['a', 'a', null, 'end\ud83d', '😀 é', '😀 é', null, '', ''];
  const expected = ['a', 'a', null, 'end\ufffd', '😀 é', '😀 é', null, '', ''];
  const n = 9_000;
  const rows = Array.from({ length: n }, () => ({ project_id: 'p', event_ts: 1n, time_unix_nano: 1n }));
  const built = batchFromRows(schema, rows);
  const body = Array.from({ length: n }, (_, i) => pattern[i % pattern.length]!);
  const batch = {
    numRows: n,
    columns: { ...built.columns, body: { kind: 'string' as const, values: body } },
  };
  assert.deepEqual(
    roundTrip(schema, batch).getColumn('body').toArray(),
    Array.from({ length: n }, (_, i) => expected[i % expected.length]!),
  );
});

test('repeat rows hold their value in every page; real nulls stay null', () => {
  const schema = SCHEMAS.logs;
  const pattern = ['a', 'a', null, 'a', 'bé', 'bé', null, null, 'bé', 'c', 'c'];
  for (const n of [pattern.length, 9_000]) {
    const bodies = Array.from({ length: n }, (_, i) => pattern[i % pattern.length]!);
    const rows = bodies.map((body) => ({ project_id: 'p', event_ts: 1n, time_unix_nano: 1n, body }));
    const batch = batchFromRows(schema, rows);
    const col = batch.columns['body']!;
    assert.ok(col.kind === 'utf8' && col.repeats?.includes(1), 'the builder marks repeats');
    const df = roundTrip(schema, batch);
    assert.deepEqual(df.getColumn('body').toArray(), bodies, `${n} rows`);
  }
});

test('numeric columns with nulls alone, in runs and at both ends read back as written', () => {
  const schema = SCHEMAS.metrics_hist;
  // Valid rows are copied a run at a time: runs of every length, single rows between nulls, a
  // null first and last, across row groups of 4,096 (ranges that start inside a run).
  const valid = (i: number) => {
    const k = i % 23;
    return k !== 0 && k !== 3 && k !== 5 && !(k >= 11 && k < 15) && i !== 9_999;
  };
  const n = 10_000;
  const rows = Array.from({ length: n }, (_, i) => ({
    project_id: 'p',
    event_ts: 1n,
    time_unix_nano: 1n,
    count: valid(i) ? BigInt(i) * 1_000_003n - 4_000_000n : null,
    scale: valid(i + 1) ? (i % 41) - 20 : null,
    zero_threshold: valid(i + 2) ? i / 8 : null,
  }));
  const df = roundTrip(schema, batchFromRows(schema, rows));
  assert.deepEqual(
    df
      .getColumn('count')
      .toArray()
      .map((v) => (v === null ? null : BigInt(v))),
    rows.map((r) => r.count),
  );
  assert.deepEqual(
    df.getColumn('scale').toArray(),
    rows.map((r) => r.scale),
  );
  assert.deepEqual(
    df.getColumn('zero_threshold').toArray(),
    rows.map((r) => r.zero_threshold),
  );
});

test('list cells (null, empty, one and many elements) read back as written, whatever the offsets', () => {
  const schema = SCHEMAS.metrics_hist;
  const names = schema.columns.map((c) => c.name);
  // polars hands int64 elements back as numbers: values within 2^53 compare exactly.
  const shapes: (bigint[] | null)[] = [null, [], [7n], [1n, -2n, 9007199254740991n], [], null, [0n, 5n]];
  const n = 9_000; // several pages
  const counts = Array.from({ length: n }, (_, i) => shapes[i % shapes.length]!);
  const bounds = counts.map((c, i) => (c === null ? null : c.map((_, k) => i + k / 4)));
  const rows = counts.map((c, i) => ({
    project_id: 'p',
    event_ts: 1n,
    time_unix_nano: 1n,
    bucket_counts: c,
    explicit_bounds: bounds[i],
  }));
  const whole = batchFromRows(schema, rows);
  // The same rows as a slice of a packed batch (its offsets start past 0) and as joined parts.
  const b = new BatchBuilder(schema, n);
  b.appendBatch(unpackBatch(packBatch(batchFromRows(schema, [...rows.slice(0, 5), ...rows])), names), 5);
  const joined = joinBatches(
    [packBatch(batchFromRows(schema, rows.slice(0, 3))), packBatch(batchFromRows(schema, rows.slice(3)))],
    names,
  );
  const asArrays = (v: unknown) => (v === null ? null : [...(v as Iterable<unknown>)]);
  for (const [label, batch] of [
    ['built', whole],
    ['sliced', b.view()],
    ['joined', joined],
  ] as const) {
    const df = roundTrip(schema, batch);
    assert.deepEqual(
      df.getColumn('bucket_counts').toArray().map(asArrays),
      counts.map((c) => c?.map(Number) ?? null),
      label,
    );
    assert.deepEqual(df.getColumn('explicit_bounds').toArray().map(asArrays), bounds, label);
  }
});

test('a column of only null lists keeps its list type', () => {
  const schema = SCHEMAS.metrics_hist;
  const rows = [0, 1].map((i) => ({ project_id: `p${i}`, event_ts: 1n, time_unix_nano: 1n }));
  const df = roundTrip(schema, batchFromRows(schema, rows));
  assert.equal(String(df.schema.bucket_counts), String(pl.List(pl.Int64)));
  assert.equal(df.getColumn('bucket_counts').nullCount(), 2);
});
