import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromRows } from '../../src/delta/batch.ts';
import {
  compareCodePoints,
  computeStats,
  type FileStats,
  mergeStats,
  parseJsonExact,
  parseStats,
  STRING_STATS_PREFIX,
  statsToJson,
  truncateMax,
  truncateMin,
} from '../../src/delta/stats.ts';
import { type ColumnDef, type Row, SCHEMAS, type TableSchema } from '../../src/schema/tables.ts';
import { makeRows } from './rows.ts';

function schemaOf(columns: ColumnDef[]): TableSchema {
  return { name: 'logs', columns, byName: new Map(columns.map((c) => [c.name, c])) };
}
const c = (name: string, type: ColumnDef['type'], nullable = true): ColumnDef => ({
  name,
  type,
  required: !nullable,
  nullable,
});

const MIN64 = -(2n ** 63n);
const MAX64 = 2n ** 63n - 1n;

test('int64 min/max are exact at the extremes and survive JSON', () => {
  const schema = schemaOf([c('v', 'long')]);
  const rows: Row[] = [
    { v: 2n ** 53n + 1n },
    { v: MAX64 },
    { v: null },
    { v: MIN64 },
    { v: -(2n ** 53n) - 1n },
  ];
  const stats = computeStats(schema, batchFromRows(schema, rows));
  assert.equal(stats.minValues.v, MIN64);
  assert.equal(stats.maxValues.v, MAX64);
  assert.equal(stats.nullCount.v, 1);
  assert.equal(stats.numRecords, 5);
  const json = statsToJson(schema, stats);
  assert.match(json, /"minValues":\{"v":-9223372036854775808\}/);
  assert.match(json, /"maxValues":\{"v":9223372036854775807\}/);
  assert.deepEqual(parseStats(schema, json), stats);
});

test('values just beyond 2^53 are not rounded', () => {
  const schema = schemaOf([c('v', 'long')]);
  const stats = computeStats(
    schema,
    batchFromRows(schema, [{ v: 9007199254740993n }, { v: 9007199254740995n }]),
  );
  const json = statsToJson(schema, stats);
  assert.ok(json.includes('9007199254740993') && json.includes('9007199254740995'));
  const back = parseStats(schema, json)!;
  assert.equal(back.minValues.v, 9007199254740993n);
  assert.equal(back.maxValues.v, 9007199254740995n);
});

test('all-null and empty columns: null count only, no min/max', () => {
  const schema = schemaOf([c('s', 'string'), c('n', 'long'), c('d', 'double'), c('b', 'boolean')]);
  const stats = computeStats(schema, batchFromRows(schema, [{}, {}, {}]));
  assert.deepEqual(stats.minValues, {});
  assert.deepEqual(stats.maxValues, {});
  assert.deepEqual(stats.nullCount, { s: 3, n: 3, d: 3, b: 3 });
});

test('null counts for every column kind, booleans and lists have no min/max', () => {
  const schema = schemaOf([
    c('b', 'boolean'),
    c('l', { list: 'long' }),
    c('f', { list: 'double' }),
    c('i', 'integer'),
  ]);
  const rows: Row[] = [
    { b: true, l: [1n], f: [], i: 5 },
    { b: null, l: null, f: null, i: null },
    { b: false, l: [], f: [2.5], i: -(2 ** 31) },
  ];
  const stats = computeStats(schema, batchFromRows(schema, rows));
  assert.deepEqual(stats.nullCount, { b: 1, l: 1, f: 1, i: 1 });
  assert.deepEqual(stats.minValues, { i: -(2 ** 31) });
  assert.deepEqual(stats.maxValues, { i: 5 });
});

test('doubles: NaN drops the bounds, infinities drop the side they are on', () => {
  const schema = schemaOf([c('a', 'double'), c('b', 'double'), c('z', 'double')]);
  const rows: Row[] = [
    { a: 1, b: Number.NEGATIVE_INFINITY, z: -0 },
    { a: Number.NaN, b: 3.5, z: 0 },
  ];
  const stats = computeStats(schema, batchFromRows(schema, rows));
  assert.equal(stats.minValues.a, undefined);
  assert.equal(stats.maxValues.a, undefined);
  assert.equal(stats.minValues.b, undefined);
  assert.equal(stats.maxValues.b, 3.5);
  const json = statsToJson(schema, stats);
  assert.doesNotMatch(json, /NaN|Infinity/);
  assert.deepEqual(parseStats(schema, json), stats);
});

test('timestamps: millisecond floor for min, ms floor + 999 µs for max, ISO in JSON', () => {
  const schema = schemaOf([c('t', 'timestamp')]);
  const rows: Row[] = [{ t: 1718000000123456n }, { t: 1718000000000001n }, { t: -1n }];
  const stats = computeStats(schema, batchFromRows(schema, rows));
  assert.equal(stats.minValues.t, -1000n); // 1969-12-31T23:59:59.999Z
  assert.equal(stats.maxValues.t, 1718000000123999n);
  const json = statsToJson(schema, stats);
  assert.match(json, /"minValues":\{"t":"1969-12-31T23:59:59.999Z"\}/);
  assert.match(json, /"maxValues":\{"t":"2024-06-10T06:13:20.123Z"\}/);
  assert.deepEqual(parseStats(schema, json), stats);
});

test('timestamps outside years 0001-9999 get no bounds', () => {
  const schema = schemaOf([c('t', 'timestamp')]);
  const stats = computeStats(schema, batchFromRows(schema, [{ t: 0n }, { t: 2n ** 60n }]));
  assert.equal(stats.minValues.t, undefined);
  assert.equal(stats.maxValues.t, undefined);
  assert.equal(stats.nullCount.t, 0);
});

test('strings compare by code point, not UTF-16 unit', () => {
  // U+FFFF < U+1F600 by code point, though '\uffff' > '\ud83d' as UTF-16 units.
  assert.ok(compareCodePoints('\uffff', '😀') < 0);
  assert.ok('\uffff' > '😀');
  assert.ok(compareCodePoints('\ue000', '𝄞') < 0);
  assert.ok(compareCodePoints('a', 'b') < 0);
  assert.ok(compareCodePoints('ab', 'a') > 0);
  assert.equal(compareCodePoints('😀x', '😀x'), 0);
  const schema = schemaOf([c('s', 'string')]);
  const stats = computeStats(schema, batchFromRows(schema, [{ s: '😀' }, { s: '\uffff' }, { s: 'z' }]));
  assert.equal(stats.minValues.s, 'z');
  assert.equal(stats.maxValues.s, '😀');
});

test('string min and max are those of code point order, for values sharing long prefixes', () => {
  // Values that agree for 0-40 bytes and then differ at any byte of a word, in every UTF-8 length.
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const pieces = ['a', 'b', 'z', '{"k":', 'é', '€', '😀', '\u007f', '\u0080', ''];
  const prefix = '{"http.request.method":"GET","http.route":"/api/v1/items/{id}",';
  const schema = schemaOf([c('s', 'string')]);
  for (let round = 0; round < 50; round++) {
    const values = Array.from({ length: 40 }, () => {
      let v = prefix.slice(0, rand(prefix.length + 1));
      for (let k = rand(12); k > 0; k--) v += pieces[rand(pieces.length)];
      return v;
    });
    const rows = values.map((s) => (rand(10) === 0 ? { s: null } : { s }));
    const kept = rows.flatMap((r) => (r.s === null ? [] : [r.s]));
    const stats = computeStats(schema, batchFromRows(schema, rows));
    if (kept.length === 0) continue;
    const sorted = [...kept].sort(compareCodePoints);
    assert.equal(stats.minValues.s, truncateMin(sorted[0]!), `round ${round}`);
    assert.equal(stats.maxValues.s, truncateMax(sorted.at(-1)!), `round ${round}`);
  }
});

test('long strings: the min is a prefix, the max an upper bound, both within the limit', () => {
  const long = 'x'.repeat(STRING_STATS_PREFIX) + 'tail';
  assert.equal(truncateMin(long), 'x'.repeat(STRING_STATS_PREFIX));
  const max = truncateMax(long)!;
  assert.equal(max, 'x'.repeat(STRING_STATS_PREFIX - 1) + 'y');
  assert.ok(compareCodePoints(max, long) > 0);
  // Astral characters count as one code point and are never split.
  const astral = '😀'.repeat(STRING_STATS_PREFIX + 3);
  assert.equal(truncateMin(astral), '😀'.repeat(STRING_STATS_PREFIX));
  const amax = truncateMax(astral)!;
  assert.equal(amax, `${'😀'.repeat(STRING_STATS_PREFIX - 1)}😁`);
  assert.ok(compareCodePoints(amax, astral) > 0);
  // Incrementing U+D7FF skips the surrogate range.
  assert.equal(truncateMax(`${'\ud7ff'.repeat(STRING_STATS_PREFIX)}z`)!.at(-1), '\ue000');
  // No bound exists when every code point is the largest one.
  assert.equal(truncateMax('\u{10ffff}'.repeat(STRING_STATS_PREFIX + 1)), null);
  // Short strings stay as they are.
  assert.equal(truncateMin('short'), 'short');
  assert.equal(truncateMax('short'), 'short');
});

test('a lone surrogate is counted as the U+FFFD it is stored as', () => {
  const schema = schemaOf([c('s', 'string')]);
  const stats = computeStats(schema, batchFromRows(schema, [{ s: 'a\ud800' }]));
  assert.equal(stats.minValues.s, 'a\ufffd');
});

test('JSON of stats with unusual column names and strings is valid JSON', () => {
  const schema = schemaOf([c('quote"name', 'string'), c('n', 'integer')]);
  const stats = computeStats(schema, batchFromRows(schema, [{ 'quote"name': 'line\n"x"\\', n: 7 }]));
  const json = statsToJson(schema, stats);
  const obj = JSON.parse(json) as { minValues: Record<string, unknown> };
  assert.equal(obj.minValues['quote"name'], 'line\n"x"\\');
  assert.deepEqual(parseStats(schema, json), stats);
});

test('parseJsonExact keeps big integers and leaves other numbers alone', () => {
  const v = parseJsonExact(
    '{"a":9223372036854775807,"b":1.5,"c":12,"d":-9007199254740993,"e":1e300}',
  ) as Record<string, unknown>;
  assert.equal(v.a, 9223372036854775807n);
  assert.equal(v.b, 1.5);
  assert.equal(v.c, 12);
  assert.equal(v.d, -9007199254740993n);
  assert.equal(v.e, 1e300);
});

test('parseStats rejects garbage', () => {
  const schema = schemaOf([c('n', 'long')]);
  assert.equal(parseStats(schema, null), null);
  assert.equal(parseStats(schema, '{not json'), null);
  assert.equal(parseStats(schema, '{"numRecords":-1}'), null);
});

test('merged stats equal the stats of the concatenated rows', () => {
  for (const table of ['logs', 'metrics_hist', 'spans'] as const) {
    const schema = SCHEMAS[table];
    const parts = [0, 1, 2, 3].map((i) => makeRows(schema, 5 + i * 7, 100 + i, i * 100));
    const each = parts.map((rows) => computeStats(schema, batchFromRows(schema, rows)));
    const merged = mergeStats(schema, each);
    const whole = computeStats(schema, batchFromRows(schema, parts.flat()));
    assert.deepEqual(merged, whole, table);
  }
});

test('merging keeps a bound only when every file with values has it', () => {
  const schema = schemaOf([c('d', 'double')]);
  const a: FileStats = { numRecords: 2, minValues: { d: 1 }, maxValues: { d: 2 }, nullCount: { d: 0 } };
  const noBounds: FileStats = { numRecords: 1, minValues: {}, maxValues: {}, nullCount: { d: 0 } }; // NaN
  const allNull: FileStats = { numRecords: 3, minValues: {}, maxValues: {}, nullCount: { d: 3 } };
  assert.deepEqual(mergeStats(schema, [a, allNull]), {
    numRecords: 5,
    minValues: { d: 1 },
    maxValues: { d: 2 },
    nullCount: { d: 3 },
  });
  assert.deepEqual(mergeStats(schema, [a, noBounds]), {
    numRecords: 3,
    minValues: {},
    maxValues: {},
    nullCount: { d: 0 },
  });
});
