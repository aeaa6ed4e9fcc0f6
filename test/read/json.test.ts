import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import type { ReadQuery } from '../../src/read/filters.ts';
import { isoFromMicros, rowToJson } from '../../src/read/index.ts';
import { closeReadWorkers, streamJson, streamRows } from '../../src/read/query.ts';
import { type Row, TABLE_NAMES, type TableName } from '../../src/schema/tables.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import { appendRows, fullRow, makeFixture } from './fixtures.ts';

describe('isoFromMicros', () => {
  test('microseconds kept, negative times floor correctly', () => {
    assert.equal(isoFromMicros(0n), '1970-01-01T00:00:00.000000Z');
    assert.equal(isoFromMicros(1n), '1970-01-01T00:00:00.000001Z');
    assert.equal(isoFromMicros(-1n), '1969-12-31T23:59:59.999999Z');
    assert.equal(isoFromMicros(-1000n), '1969-12-31T23:59:59.999000Z');
    assert.equal(isoFromMicros(1_767_312_000_983_007n), '2026-01-02T00:00:00.983007Z');
  });

  test('beyond what a Date holds: the decimal microseconds', () => {
    assert.equal(isoFromMicros(9_223_372_036_854_775_807n), '9223372036854775807');
    assert.equal(isoFromMicros(-9_223_372_036_854_775_808n), '-9223372036854775808');
  });
});

describe('rowToJson', () => {
  test('int64 as decimal strings, timestamps as ISO, special doubles as strings, lists converted', () => {
    const row = {
      project_id: 'p',
      event_ts: 1_700_000_000_000_001n,
      time_unix_nano: 9_223_372_036_854_775_807n,
      start_time_unix_nano: -9_223_372_036_854_775_808n,
      count: null,
      sum: Number.NaN,
      min: Number.NEGATIVE_INFINITY,
      max: Number.POSITIVE_INFINITY,
      zero_threshold: -0,
      scale: -3,
      bucket_counts: [2n ** 62n, -1n, 0n],
      explicit_bounds: [0.5, Number.POSITIVE_INFINITY, Number.NaN],
      quantiles: null,
      positive_bucket_counts: [],
    };
    const json = rowToJson(row, 'metrics_hist');
    assert.deepEqual(json, {
      project_id: 'p',
      event_ts: '2023-11-14T22:13:20.000001Z',
      time_unix_nano: '9223372036854775807',
      start_time_unix_nano: '-9223372036854775808',
      count: null,
      sum: 'NaN',
      min: '-Infinity',
      max: 'Infinity',
      zero_threshold: -0,
      scale: -3,
      bucket_counts: ['4611686018427387904', '-1', '0'],
      explicit_bounds: [0.5, 'Infinity', 'NaN'],
      quantiles: null,
      positive_bucket_counts: [],
    });
    // The result survives JSON exactly.
    assert.deepEqual(JSON.parse(JSON.stringify(json)), { ...json, zero_threshold: 0 });
  });

  test('booleans and strings pass through; keys keep the row order', () => {
    const json = rowToJson({ value_int: -5n, is_monotonic: true, metric_name: 'cpu' }, 'metrics_points');
    assert.deepEqual(Object.entries(json), [
      ['value_int', '-5'],
      ['is_monotonic', true],
      ['metric_name', 'cpu'],
    ]);
  });
});

/** The reference: each row's rowToJson text after a comma. */
const rowText = (row: Row, table: TableName) => `,${JSON.stringify(rowToJson(row, table))}`;

/**
 * A query's JSON slices (the query worker's `json` task) against its rows (`fetch`), row by row:
 * every row's text must be the reference's, byte for byte, and end where `ends` says.
 */
async function compareJsonToRows(
  layout: InstanceLayout,
  table: TableName,
  query: ReadQuery = {},
): Promise<number> {
  const expected: string[] = [];
  for await (const c of streamRows(layout, table, query))
    for (const row of c.rows) expected.push(rowText(row, table));
  let n = 0;
  for await (const c of streamJson(layout, table, query)) {
    // A buffer of its own: handed over whole, it carries nothing beyond the text.
    assert.equal(c.json.buffer.byteLength, c.json.byteLength);
    assert.equal(c.json.byteLength, c.ends.at(-1) ?? 0);
    let start = 0;
    for (const end of c.ends) {
      assert.equal(
        Buffer.from(c.json.subarray(start, end)).toString('utf8'),
        expected[n],
        `${table} row ${n}`,
      );
      start = end;
      n++;
    }
  }
  assert.equal(n, expected.length);
  return n;
}

describe('the JSON of a read, written from Arrow columns in the query worker', () => {
  let dir: string;
  after(async () => {
    await closeReadWorkers();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('every table of the read fixture: the rowToJson text of each row', async () => {
    const fx = await makeFixture();
    try {
      for (const table of TABLE_NAMES) assert.ok((await compareJsonToRows(fx.layout, table)) > 0);
    } finally {
      await fx.cleanup();
    }
  });

  test('strings escaped from their bytes, times of any range, values past the first buffer', async () => {
    dir = await mkdtemp(join(tmpdir(), 'otelake-json-'));
    const layout = new InstanceLayout(dir, 'json');
    const day = '2026-03-01';
    const base = BigInt(Date.parse(`${day}T00:00:00Z`)) * 1000n;
    // Every character JSON escapes, quotes and backslashes among others, 2-, 3- and 4-byte characters,
    // strings of 12 bytes and of 13 (the longest kept inside an Arrow view, and the shortest not),
    // empty strings, a lone surrogate (stored as U+FFFD), and bodies long enough to grow the text's
    // buffer past its first 64 KiB.
    const controls = Array.from({ length: 0x20 }, (_, c) => String.fromCharCode(c)).join('');
    const bodies = [
      `${controls}"\\/\u007f`,
      'é€😀 "quoted" \\ back',
      'x'.repeat(12),
      'x'.repeat(13),
      '',
      'lone \ud800 surrogate',
      'y'.repeat(5000),
    ];
    const rows = Array.from({ length: 120 }, (_, i) =>
      fullRow('logs', {
        project_id: 'p',
        event_ts: base + BigInt(i) * 250_000n,
        time_unix_nano: i % 2 === 0 ? 9_223_372_036_854_775_807n : -5n,
        body: i % 9 === 8 ? null : `${bodies[i % bodies.length]} ${i}`,
        severity_text: i % 3 === 0 ? 'abcdefghijkl' : 'abcdefghijklm',
        attributes: JSON.stringify({ k: bodies[(i + 1) % bodies.length] }),
        severity_number: i % 4 === 0 ? null : i,
        flags: i % 5 === 0 ? null : -(2n ** 63n) + BigInt(i),
      }),
    );
    await appendRows(layout, day, 'logs', rows);
    // Rows before 1970 and beyond the microseconds a double holds exactly, in a day of their own.
    const far = ['1969-12-31', '2262-04-11'];
    await appendRows(layout, far[0]!, 'logs', [
      fullRow('logs', { project_id: 'p', event_ts: -1n }),
      fullRow('logs', { project_id: 'p', event_ts: -1_000_001n }),
    ]);
    await appendRows(layout, far[1]!, 'logs', [
      fullRow('logs', { project_id: 'p', event_ts: 9_223_372_036_854_775_807n }),
      fullRow('logs', { project_id: 'p', event_ts: 2n ** 53n + 7n }),
    ]);
    await closeDeltaWorkers();
    assert.equal(await compareJsonToRows(layout, 'logs', { dateFrom: day, dateTo: day }), rows.length);
    assert.equal(await compareJsonToRows(layout, 'logs'), rows.length + 4);
    // Parsed back, the strings are the ones stored.
    let text = '';
    for await (const c of streamJson(layout, 'logs', { dateFrom: day, dateTo: day }))
      text += Buffer.from(c.json).toString('utf8');
    const parsed = JSON.parse(`[${text.slice(1)}]`) as { body: string | null; time_unix_nano: string }[];
    const body = (i: number) => parsed.find((r) => r.body?.endsWith(` ${i}`))?.body;
    assert.equal(body(0), `${bodies[0]} 0`);
    assert.equal(body(1), `${bodies[1]} 1`);
    assert.equal(body(5), 'lone \ufffd surrogate 5');
    assert.ok(parsed.some((r) => r.time_unix_nano === '9223372036854775807'));
  });
});
