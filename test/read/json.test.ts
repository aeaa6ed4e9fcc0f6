import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isoFromMicros, rowToJson } from '../../src/read/index.ts';
import { rowsJsonText } from '../../src/read/json.ts';

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

describe('rowsJsonText', () => {
  test("each row's rowToJson text after a comma, and the byte offset where each ends", () => {
    // Multi-byte characters (2, 3 and 4 bytes in UTF-8) and rows enough to grow the first buffer.
    const rows = Array.from({ length: 300 }, (_, i) => ({
      project_id: 'p',
      event_ts: 1_700_000_000_000_000n + BigInt(i),
      body: `${i} é€😀 ${'x'.repeat(i * 3)}`,
      severity_number: i,
    }));
    const { json, ends } = rowsJsonText(rows, 'logs');
    assert.equal(ends.length, rows.length);
    let start = 0;
    for (let i = 0; i < rows.length; i++) {
      const text = Buffer.from(json.subarray(start, ends[i])).toString('utf8');
      assert.equal(text, `,${JSON.stringify(rowToJson(rows[i]!, 'logs'))}`);
      start = ends[i]!;
    }
    assert.equal(json.byteLength, start);
    // The whole is a JSON array once bracketed (its first comma dropped).
    const all = JSON.parse(`[${Buffer.from(json.subarray(1)).toString('utf8')}]`);
    assert.equal(all[299].body.slice(0, 9), '299 é€😀 ');
    // A buffer of its own: handed over whole, it carries nothing beyond the text.
    assert.equal(json.buffer.byteLength, json.byteLength);
  });

  test('no rows: no text', () => {
    const { json, ends } = rowsJsonText([], 'spans');
    assert.equal(json.byteLength, 0);
    assert.equal(ends.length, 0);
  });
});
