// Attribute limits on mapped rows: the first attributes are kept and the rest counted as dropped;
// long strings are cut (also inside arrays and maps); rows within the limits are left as they are.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AttributeLimiter } from '../../src/otlp/limits.ts';
import { type Row, SCHEMAS, type TableName } from '../../src/schema/tables.ts';

/** Limits rows given by column name, as the decoder limits each row's values; returns the drops. */
function limit(limiter: AttributeLimiter, table: TableName, rows: Row[]): number {
  const names = SCHEMAS[table].columns.map((c) => c.name);
  let dropped = 0;
  for (const row of rows) {
    const values = names.map((name) => row[name] ?? null);
    dropped += limiter.apply(table, values);
    names.forEach((name, j) => {
      if (name in row || values[j] !== null) row[name] = values[j];
    });
  }
  return dropped;
}

const attrs = (n: number, value = (i: number) => i as unknown) =>
  JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value(i)])));

function spanRow(attributes: string, dropped = 0, resource = '{}'): Row {
  return {
    attributes,
    dropped_attributes_count: dropped,
    resource_attributes: resource,
    resource_dropped_attributes_count: 0,
    scope_attributes: '{}',
    scope_dropped_attributes_count: 0,
  };
}

test('an item keeps its first attributes up to the count limit; the others are counted as dropped', () => {
  const limiter = new AttributeLimiter({ countLimit: 3, valueLengthLimit: 1000 });
  const rows = [spanRow(attrs(5), 2), spanRow(attrs(3)), spanRow(attrs(40))];
  assert.equal(limit(limiter, 'spans', rows), 2 + 37);
  assert.deepEqual(JSON.parse(rows[0]!['attributes'] as string), { k0: 0, k1: 1, k2: 2 });
  assert.equal(rows[0]!['dropped_attributes_count'], 4, 'added to what the client dropped');
  assert.equal(rows[1]!['attributes'], attrs(3), 'at the limit: unchanged');
  assert.equal(rows[1]!['dropped_attributes_count'], 0);
  assert.equal(rows[2]!['dropped_attributes_count'], 37);
});

test('string values are cut to the length limit, in arrays and maps too, without splitting a pair', () => {
  const limiter = new AttributeLimiter({ countLimit: 100, valueLengthLimit: 4 });
  const long = JSON.stringify({
    s: 'abcdefgh',
    short: 'abc',
    n: 123456789,
    list: ['abcdef', 7, true, null],
    map: { inner: 'xyzxyzxyz', deep: [{ x: 'qwertyuiop' }] },
    emoji: 'abc😀d',
  });
  const rows = [spanRow(long)];
  assert.equal(limit(limiter, 'logs', rows), 0, 'cutting is not dropping');
  assert.deepEqual(JSON.parse(rows[0]!['attributes'] as string), {
    s: 'abcd',
    short: 'abc',
    n: 123456789,
    list: ['abcd', 7, true, null],
    map: { inner: 'xyzx', deep: [{ x: 'qwer' }] },
    emoji: 'abc', // 'abc' + half of the emoji would be 4 code units
  });
  assert.equal(rows[0]!['dropped_attributes_count'], 0);
});

test('numbers written as strings (int64 beyond 2^53, NaN, infinities) are not cut as strings', () => {
  const limiter = new AttributeLimiter({ countLimit: 100, valueLengthLimit: 4 });
  const text = JSON.stringify({
    big: '12345678901234567',
    min: '-9223372036854775808',
    nan: 'NaN',
    inf: '-Infinity',
    list: ['9007199254740993', 'Infinity', 'abcdefgh'],
    digits: '12345678901234567890123', // too long for an int64: a string
    word: 'Infinityyy',
  });
  const rows = [spanRow(text)];
  limit(limiter, 'logs', rows);
  assert.deepEqual(JSON.parse(rows[0]!['attributes'] as string), {
    big: '12345678901234567',
    min: '-9223372036854775808',
    nan: 'NaN',
    inf: '-Infinity',
    list: ['9007199254740993', 'Infinity', 'abcd'],
    digits: '1234',
    word: 'Infi',
  });
});

test('resource and scope attributes are limited with their own counts; rows sharing a text share the result', () => {
  const limiter = new AttributeLimiter({ countLimit: 2, valueLengthLimit: 100 });
  const resource = attrs(4);
  const rows = [spanRow('{}', 0, resource), spanRow('{}', 0, resource)];
  limit(limiter, 'span_events', rows);
  for (const row of rows) {
    assert.deepEqual(JSON.parse(row['resource_attributes'] as string), { k0: 0, k1: 1 });
    assert.equal(row['resource_dropped_attributes_count'], 2);
    assert.equal(row['dropped_attributes_count'], 0);
  }
});

test("a data point's attributes keep their count (they name its series); long values are cut", () => {
  const limiter = new AttributeLimiter({ countLimit: 2, valueLengthLimit: 3 });
  const row: Row = { attributes: attrs(5, (i) => `value${i}`), resource_attributes: attrs(3) };
  limit(limiter, 'metrics_points', [row]);
  const kept = JSON.parse(row['attributes'] as string);
  assert.equal(Object.keys(kept).length, 5);
  assert.equal(kept.k4, 'val');
  assert.equal(row['dropped_attributes_count'], undefined, 'no such column');
  assert.equal(row['resource_dropped_attributes_count'], 1);
});

test('texts too short to break a limit are not parsed; other texts within the limits stay the same string', () => {
  const limiter = new AttributeLimiter({ countLimit: 1024, valueLengthLimit: 65536 });
  // Not JSON at all, but short: never looked at.
  const rows = [spanRow('not json'), spanRow(attrs(1000, () => 'x'.repeat(10)))];
  const before = rows[1]!['attributes'];
  assert.ok((before as string).length > 5125, 'long enough to be parsed');
  assert.equal(limit(limiter, 'spans', rows), 0);
  assert.equal(rows[0]!['attributes'], 'not json');
  assert.equal(rows[1]!['attributes'], before);
  // '__proto__' is an attribute like another.
  const proto = new AttributeLimiter({ countLimit: 1, valueLengthLimit: 2 });
  const r = [spanRow('{"__proto__":"abcdef","b":1}')];
  limit(proto, 'spans', r);
  assert.equal(r[0]!['attributes'], '{"__proto__":"ab"}');
  assert.equal(r[0]!['dropped_attributes_count'], 1);
});
