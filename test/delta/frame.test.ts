import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pl from 'nodejs-polars';
import { batchFromRows } from '../../src/delta/batch.ts';
import { batchFrame } from '../../src/delta/frame.ts';
import { SCHEMAS, TABLE_NAMES } from '../../src/schema/tables.ts';
import { readRows, sortRows } from './read.ts';
import { makeRows, rowToJson } from './rows.ts';

test('every table: a batch written to Parquet reads back exactly', () => {
  const dir = mkdtempSync(join(tmpdir(), 'otelake-frame-'));
  try {
    for (const name of TABLE_NAMES) {
      const schema = SCHEMAS[name];
      const rows = makeRows(schema, 300, 7, 0, { specialDoubles: true, extremeTimestamps: true });
      const path = join(dir, `${name}.parquet`);
      batchFrame(schema.columns, batchFromRows(schema, rows))
        .sinkParquet(path, { compression: 'zstd' })
        .collectSync();
      const expected = sortRows(rows.map((r) => rowToJson(schema, r)));
      assert.deepEqual(readRows([path], schema), expected, name);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('frame types are the Delta storage types', () => {
  const schema = SCHEMAS.metrics_hist;
  const df = batchFrame(schema.columns, batchFromRows(schema, makeRows(schema, 3, 1))).collectSync();
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
  const df = batchFrame(schema.columns, batchFromRows(schema, rows)).collectSync();
  assert.deepEqual(df.getColumn('body').toArray(), [
    'plain',
    '',
    null,
    '😀 é 中',
    'end\ufffd',
    '\ufffdstart',
    'x',
  ]);
  // ASCII-only column takes the fast path and must still split correctly.
  assert.deepEqual(df.getColumn('project_id').toArray(), ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6']);
});

test('string columns (arrays of strings) cross like built ones: repeats, nulls, lone surrogates', () => {
  const schema = SCHEMAS.logs;
  const pattern = ['a', 'a', null, 'end\ud83d', '😀 é', '😀 é', null, '', ''];
  const expected = ['a', 'a', null, 'end\ufffd', '😀 é', '😀 é', null, '', ''];
  for (const n of [pattern.length, 9_000]) {
    const rows = Array.from({ length: n }, () => ({ project_id: 'p', event_ts: 1n, time_unix_nano: 1n }));
    const built = batchFromRows(schema, rows);
    const body = Array.from({ length: n }, (_, i) => pattern[i % pattern.length]!);
    const batch = {
      numRows: n,
      columns: { ...built.columns, body: { kind: 'string' as const, values: body } },
    };
    const df = batchFrame(schema.columns, batch).collectSync();
    assert.deepEqual(
      df.getColumn('body').toArray(),
      Array.from({ length: n }, (_, i) => expected[i % expected.length]!),
      `${n} rows`,
    );
  }
});

test('repeat rows are expanded (small batches) or filled back by polars; real nulls stay null', () => {
  const schema = SCHEMAS.logs;
  const pattern = ['a', 'a', null, 'a', 'bé', 'bé', null, null, 'bé', 'c', 'c'];
  for (const n of [pattern.length, 9_000]) {
    const bodies = Array.from({ length: n }, (_, i) => pattern[i % pattern.length]!);
    const rows = bodies.map((body) => ({ project_id: 'p', event_ts: 1n, time_unix_nano: 1n, body }));
    const batch = batchFromRows(schema, rows);
    const body = batch.columns['body']!;
    assert.ok(body.kind === 'utf8' && body.repeats?.includes(1), 'the builder marks repeats');
    const df = batchFrame(schema.columns, batch).collectSync();
    assert.deepEqual(df.getColumn('body').toArray(), bodies, `${n} rows`);
    assert.deepEqual(
      df.getColumn('project_id').toArray(),
      bodies.map(() => 'p'),
    );
    assert.deepEqual(
      df.columns,
      schema.columns.map((c) => c.name),
    );
  }
});

test('a column of only null lists keeps its list type', () => {
  const schema = SCHEMAS.metrics_hist;
  const rows = [0, 1].map((i) => ({ project_id: `p${i}`, event_ts: 1n, time_unix_nano: 1n }));
  const df = batchFrame(schema.columns, batchFromRows(schema, rows)).collectSync();
  assert.equal(String(df.schema.bucket_counts), String(pl.List(pl.Int64)));
  assert.equal(df.getColumn('bucket_counts').nullCount(), 2);
});
